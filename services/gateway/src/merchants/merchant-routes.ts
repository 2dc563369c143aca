import { z } from 'zod';
import { BILLING_TERMINAL_ACTIONS, CreateMerchantRequest, CurrentMerchant, DomainError, Merchant, Paged, PageQuery, PathId, PROVIDER_ENVIRONMENTS, toCurrentMerchant, toPage, UpdateMerchantRequest, UpdateProviderRequest, Uuid } from '@billing/contracts';
import { toMajorUnits, toMinorUnits } from '@billing/money';
import type { Backends } from '../backends/clients.js';
import { credentialScope } from '../auth/call-scope.js';
import { merchantOf } from '../auth/principal.js';
import { created, defineRoute, ok, type RouteSpec } from '../http/route.js';
import { assertSameId, oneOf } from '../http/views.js';
import type { Merchant__Output } from '@billing/proto-types/billing/v1/Merchant';
import type { UpdateBillingTermsRequest as UpdateMerchantMessage } from '@billing/proto-types/billing/v1/UpdateBillingTermsRequest';
import type { UpdateProviderRequest as UpdateProviderMessage } from '@billing/proto-types/billing/v1/UpdateProviderRequest';

/**
 * Merchant message → REST: the fee terms become decimals (percent, and the fixed part in AUD major
 * units). Text fields never given are the empty string, not null: the merchant's text fields are
 * strings on every read (null is allowed only on the current-merchant read, which answers the same).
 */
export function toMerchant(m: Merchant__Output): Merchant {
  return {
    id: m.id,
    name: m.name,
    description: m.description ?? '',
    contactEmail: m.contactEmail,
    contactPhone: m.contactPhone ?? '',
    country: m.country ?? '',
    timeZone: m.timeZone ?? '',
    isActive: m.isActive,
    gatewayConfigured: m.gatewayConfigured,
    createdAt: m.createdAt,
    updatedAt: m.updatedAt,
    providerEnvironment: oneOf(PROVIDER_ENVIRONMENTS, m.providerEnvironment, 'providerEnvironment'),
    merchantGuidConfigured: m.merchantGuidConfigured,
    providerMerchantProfileId: m.providerMerchantProfileId ?? '',
    billingRetryOffsetsDays: m.billingRetryOffsetsDays,
    billingTerminalAction: oneOf(BILLING_TERMINAL_ACTIONS, m.billingTerminalAction, 'billingTerminalAction'),
    bankSettlementWindowDays: m.bankSettlementWindowDays,
    platformFeePercent: Number(m.platformFeePercent),
    platformFeeFixed: toMajorUnits(Number(m.platformFeeFixedMinor), 'AUD'),
  };
}

/** Fee terms of a create or update body → the message's exact forms (percent text, fixed minor units). */
function feeTerms(body: { platformFeePercent?: number | string | null; platformFeeFixed?: number | string | null }) {
  return {
    platformFeePercent: body.platformFeePercent == null ? undefined : String(body.platformFeePercent),
    platformFeeFixedMinor: body.platformFeeFixed == null ? undefined : toMinorUnits(body.platformFeeFixed, 'AUD'),
  };
}

type Text = string | null | undefined;

/** The profile and billing terms of a create or update body → the message's forms (absent or null: undefined, unchanged on update). */
function merchantFields(body: {
  name?: Text; contactEmail?: Text; description?: Text; contactPhone?: Text; country?: Text; timeZone?: Text;
  billingRetryOffsetsDays?: Text; billingTerminalAction?: Text; bankSettlementWindowDays?: number | null;
  platformFeePercent?: number | string | null; platformFeeFixed?: number | string | null;
}) {
  return {
    name: body.name ?? undefined,
    contactEmail: body.contactEmail ?? undefined,
    description: body.description ?? undefined,
    contactPhone: body.contactPhone ?? undefined,
    country: body.country ?? undefined,
    timeZone: body.timeZone ?? undefined,
    billingRetryOffsetsDays: body.billingRetryOffsetsDays ?? undefined,
    billingTerminalAction: body.billingTerminalAction ?? undefined,
    bankSettlementWindowDays: body.bankSettlementWindowDays ?? undefined,
    ...feeTerms(body),
  };
}

const IdParams = z.object({ id: PathId });

export function merchantRoutes(backends: Backends): RouteSpec[] {
  const merchants = backends.billing.merchants;
  return [
    defineRoute({
      method: 'POST',
      url: '/api/admin/merchants',
      tag: 'Admin',
      summary: 'Create a merchant',
      description:
        'billingRetryOffsetsDays: the days after a failed charge at which it is retried, comma-separated whole days from 1 to 999 in strictly ascending order (default "1,3,7"); spaces around the numbers are allowed and dropped ("1, 3, 7" is stored and answered as "1,3,7"). billingTerminalAction: Cancel or Pause (default Cancel). bankSettlementWindowDays: 0 to 30 (default 3).',
      auth: { admin: true },
      body: CreateMerchantRequest,
      responses: { 201: Merchant, 400: null, 401: null },
      handler: async ({ body, principal }) => {
        const m = toMerchant(
          await merchants.CreateMerchant({
            scope: credentialScope(principal),
            ...merchantFields(body),
            name: body.name,
            contactEmail: body.contactEmail,
          }),
        );
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
      handler: async ({ query, principal }) => {
        const res = await merchants.ListMerchants({ ...query, scope: credentialScope(principal) });
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
      handler: async ({ params, principal }) => ok(toMerchant(await merchants.GetMerchant({ scope: credentialScope(principal), id: params.id }))),
    }),
    defineRoute({
      method: 'PATCH',
      url: '/api/admin/merchants/:id',
      tag: 'Admin',
      summary: "Update a merchant's profile and billing terms",
      description:
        'Profile: name, contactEmail, description, contactPhone, country, timeZone (as on create). Billing terms: platform fee per settled charge (platformFeePercent, e.g. 1.5 for 1.5 %, at most 4 decimals; platformFeeFixed, e.g. 0.30, in the charge currency\'s major units, 0 to 999999.99 with at most 2 decimals), billingRetryOffsetsDays, billingTerminalAction (Cancel | Pause), bankSettlementWindowDays. Absent or null fields are unchanged. The body must be a JSON object: null, an array or a scalar is 400 naming "$". The merchant\'s other fields cannot be changed here: isActive, gatewayConfigured, merchantGuidConfigured, providerMerchantProfileId, createdAt and updatedAt are maintained by the platform, and providerEnvironment and the gateway credentials (gatewayUsername, gatewayPassword, merchantGuid) are set with PUT /api/admin/merchants/{id}/provider; each one given (not null) is 400 naming it, and nothing is changed (as a PATCH of a plan naming its price). A body id differing from the path is 400. Names that are no field of a merchant are ignored. A new fee applies to charges made afterwards; a charge keeps the fee computed when it was made. The percentage and fixed parts are each rounded half-even to the charge currency\'s minor unit (0.30 JPY is 0 yen). A new name shows on hosted pages at once and in invitation messages sent within CHECKOUT_MERCHANT_CACHE_MS (default 5 s) of the change. Merchant changes emit no event.',
      auth: { admin: true },
      params: IdParams,
      body: UpdateMerchantRequest,
      responses: { 200: Merchant, 400: null, 404: null },
      handler: async ({ params, body, principal }) => {
        assertSameId('id', body.id, params.id);
        const req: UpdateMerchantMessage = {
          scope: credentialScope(principal),
          id: params.id,
          ...merchantFields(body),
        };
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
      handler: async ({ params, body, principal }) => {
        assertSameId('id', body.id, params.id);
        const req: UpdateProviderMessage = {
          scope: credentialScope(principal),
          id: params.id,
          providerEnvironment: body.providerEnvironment ?? undefined,
          gatewayUsername: body.gatewayUsername ?? undefined,
          gatewayPassword: body.gatewayPassword ?? undefined,
          merchantGuid: body.merchantGuid ?? undefined,
        };
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
          return ok(toCurrentMerchant(toMerchant(await merchants.GetMerchant({ scope: credentialScope(principal), id: merchantId }))));
        } catch (e) {
          if (e instanceof DomainError && e.code === 'merchant_not_found') throw new DomainError('not_found', 'The merchant of this credential no longer exists.');
          throw e;
        }
      },
    }),
  ];
}
