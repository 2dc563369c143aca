import { z } from 'zod';
import { CreateMerchantRequest, CurrentMerchant, DomainError, Merchant, Paged, PageQuery, toCurrentMerchant, toPage, UpdateMerchantBillingRequest, UpdateProviderRequest, Uuid } from '@billing/contracts';
import { toMajorUnits, toMinorUnits } from '@billing/money';
import type { Backends } from '../backends/clients.js';
import { merchantOf } from '../auth/principal.js';
import { created, defineRoute, ok, type RouteSpec } from '../http/route.js';
import { assertSameId, nullFill } from '../http/views.js';

const MERCHANT_FIELDS = Object.keys(Merchant.shape);

/** Merchant message → REST: the fee terms become decimals (percent, and the fixed part in AUD major units). */
export function toMerchant(msg: Record<string, unknown>): Merchant {
  const m = nullFill<Merchant>(msg, MERCHANT_FIELDS);
  m.platformFeePercent = Number(msg.platformFeePercent ?? 1.5);
  m.platformFeeFixed = toMajorUnits(Number(msg.platformFeeFixedMinor ?? 30), 'AUD');
  return m;
}

/** Fee terms of a create or update body → the message's exact forms (percent text, fixed minor units). */
function feeTerms(body: { platformFeePercent?: number | string | null; platformFeeFixed?: number | string | null }) {
  return {
    platformFeePercent: body.platformFeePercent == null ? undefined : String(body.platformFeePercent),
    platformFeeFixedMinor: body.platformFeeFixed == null ? undefined : toMinorUnits(body.platformFeeFixed, 'AUD'),
  };
}

const IdParams = z.object({ id: Uuid });

export function merchantRoutes(backends: Backends): RouteSpec[] {
  const merchants = backends.billing.merchants;
  return [
    defineRoute({
      method: 'POST',
      url: '/api/admin/merchants',
      tag: 'Admin',
      summary: 'Create a merchant',
      auth: { admin: true },
      body: CreateMerchantRequest,
      responses: { 201: Merchant, 400: null, 401: null },
      handler: async ({ body }) => {
        const { platformFeePercent: _p, platformFeeFixed: _f, ...rest } = body;
        const m = toMerchant(await merchants.CreateMerchant({ ...rest, ...feeTerms(body) }));
        return created(m, `/api/admin/merchants/${m.id}`);
      },
    }),
    defineRoute({
      method: 'GET',
      url: '/api/admin/merchants',
      tag: 'Admin',
      summary: 'List merchants',
      auth: { admin: true },
      query: PageQuery,
      responses: { 200: Paged(Merchant) },
      handler: async ({ query }) => {
        const res = await merchants.ListMerchants(query);
        return ok(toPage(res.items.map(toMerchant), res.totalCount, query));
      },
    }),
    defineRoute({
      method: 'GET',
      url: '/api/admin/merchants/:id',
      tag: 'Admin',
      summary: 'Read a merchant (all fields)',
      auth: { admin: true },
      params: IdParams,
      responses: { 200: Merchant, 404: null },
      handler: async ({ params }) => ok(toMerchant(await merchants.GetMerchant({ id: params.id }))),
    }),
    defineRoute({
      method: 'PATCH',
      url: '/api/admin/merchants/:id',
      tag: 'Admin',
      summary: "Update a merchant's billing terms",
      description:
        'Platform fee per settled charge (platformFeePercent, e.g. 1.5 for 1.5 %, at most 4 decimals; platformFeeFixed, e.g. 0.30, in the charge currency\'s major units), billingRetryOffsetsDays, billingTerminalAction (Cancel | Pause), bankSettlementWindowDays. Absent or null fields are unchanged. A new fee applies to charges made afterwards; a charge keeps the fee computed when it was made. The percentage part is rounded half-even to the cent.',
      auth: { admin: true },
      params: IdParams,
      body: UpdateMerchantBillingRequest,
      responses: { 200: Merchant, 400: null, 404: null },
      handler: async ({ params, body }) => {
        const req: Record<string, unknown> = { id: params.id, ...feeTerms(body) };
        for (const f of ['billingRetryOffsetsDays', 'billingTerminalAction', 'bankSettlementWindowDays'] as const) if (body[f] != null) req[f] = body[f];
        return ok(toMerchant(await merchants.UpdateBillingTerms(req)));
      },
    }),
    defineRoute({
      method: 'PUT',
      url: '/api/admin/merchants/:id/provider',
      tag: 'Admin',
      summary: "Set a merchant's gateway environment and credentials",
      description: 'Credentials are write-only: they are encrypted at rest and only `gatewayConfigured` and `merchantGuidConfigured` report them. A field that is absent or null keeps its stored value.',
      auth: { admin: true },
      params: IdParams,
      body: UpdateProviderRequest,
      responses: { 200: Merchant, 400: null, 404: null },
      handler: async ({ params, body }) => {
        assertSameId('id', body.id, params.id);
        const req: Record<string, unknown> = { id: params.id };
        for (const f of ['providerEnvironment', 'gatewayUsername', 'gatewayPassword', 'merchantGuid'] as const) if (body[f] != null) req[f] = body[f];
        return ok(toMerchant(await merchants.UpdateProvider(req)));
      },
    }),
    defineRoute({
      method: 'GET',
      url: '/api/Merchants/me',
      tag: 'Merchant users',
      summary: 'Read the merchant of the calling credential',
      description: 'Answers id through updatedAt. 404 when the merchant named by the token no longer exists.',
      auth: { merchant: 'Viewer' },
      responses: { 200: CurrentMerchant, 401: null, 404: null },
      handler: async ({ principal }) => {
        const merchantId = merchantOf(principal);
        if (!merchantId) throw new DomainError('unauthenticated', 'This endpoint needs a merchant credential.');
        try {
          return ok(toCurrentMerchant(toMerchant(await merchants.GetMerchant({ id: merchantId }))));
        } catch (e) {
          if (e instanceof DomainError && e.code === 'merchant_not_found') throw new DomainError('not_found', 'The merchant of this credential no longer exists.');
          throw e;
        }
      },
    }),
  ];
}
