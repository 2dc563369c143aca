import { z } from 'zod';
import { AddPaymentMethodFromTokenRequest, AddPaymentMethodRequest, PathId, PAYMENT_METHOD_TYPES, PaymentMethod, ReorderPaymentMethodsRequest } from '@billing/contracts';
import { PLATFORM_SCOPE } from '@billing/service-runtime';
import type { MerchantAccess } from '../auth/access.js';
import { callScope, merchantCallScope } from '../auth/call-scope.js';
import type { Backends } from '../backends/clients.js';
import { created, defineRoute, ok, type RouteResult, type RouteSpec } from '../http/route.js';
import { assertSameId, oneOf, orNull, present } from '../http/views.js';
import type { AddPaymentMethodReply__Output } from '@billing/proto-types/billing/v1/AddPaymentMethodReply';
import type { PaymentMethod__Output } from '@billing/proto-types/billing/v1/PaymentMethod';

export function toPaymentMethod(pm: PaymentMethod__Output): PaymentMethod {
  return {
    id: pm.id,
    merchantId: pm.merchantId,
    memberId: pm.memberId,
    type: oneOf(PAYMENT_METHOD_TYPES, pm.type, 'type'),
    brand: orNull(pm.brand),
    last4: pm.last4,
    expiryMonth: orNull(pm.expiryMonth),
    expiryYear: orNull(pm.expiryYear),
    accountName: orNull(pm.accountName),
    bsb: orNull(pm.bsb),
    rank: pm.rank,
    isDefault: pm.isDefault,
    createdAt: pm.createdAt,
  };
}

const MemberParams = z.object({ memberId: PathId });

function addedOrExisting(res: AddPaymentMethodReply__Output): RouteResult {
  const pm = toPaymentMethod(present(res.paymentMethod, 'paymentMethod'));
  return res.created ? created(pm, `/api/members/${pm.memberId}/payment-methods/${pm.id}`) : ok(pm);
}

export function paymentMethodRoutes(backends: Backends, access: MerchantAccess): RouteSpec[] {
  const methods = backends.billing.paymentMethods;
  /** For the platform admin's Idempotency-Keys: the member's merchant. */
  const ownerOf = { param: 'memberId', merchantOf: async (id: string) => (await backends.billing.members.GetMember({ scope: PLATFORM_SCOPE, id })).merchantId };
  return [
    defineRoute({
      method: 'POST',
      url: '/api/members/:memberId/payment-methods',
      tag: 'Payment methods',
      summary: 'Add a payment method (a tokenisation result)',
      description:
        'Stores the result of client-side tokenisation: type Card (last4, expiryMonth and expiryYear required, not expired; brand optional) or BankAccount (last4, accountName and bsb as 123-456 or 123456 required). A field the type requires that is missing or null is 400 naming it ("Required for a Card.", "Required for a BankAccount."); expiry on a BankAccount or bank fields on a Card are 400 too. last4 is exactly 4 digits. Fields that would carry a full number or security code (cardNumber, number, pan, accountNumber, cvc, cvv, ..., in any letter case and with or without _ or -, e.g. CardNumber, card_number, CVV) are refused with 400 naming them as sent, and never stored or logged; so is a brand or accountName holding a full card number (13 to 19 digits, spaced or not, that pass the Luhn check: 400 "Must not hold a card number; send only its last4."). The method is appended at the lowest rank; the first one becomes the default. Emits payment_method.added. Requires an Idempotency-Key.',
      auth: { merchant: 'Staff' },
      idempotent: true,
      ownerOf,
      params: MemberParams,
      body: AddPaymentMethodRequest,
      responses: { 201: PaymentMethod, 400: null, 403: null, 404: null },
      handler: async ({ params, body, principal }) => {
        assertSameId('memberId', body.memberId, params.memberId);
        return addedOrExisting(
          await methods.AddPaymentMethod({
            scope: await callScope(access, principal, body.merchantId),
            memberId: params.memberId,
            type: body.type,
            brand: body.brand ?? undefined,
            last4: body.last4,
            expiryMonth: body.expiryMonth ?? undefined,
            expiryYear: body.expiryYear ?? undefined,
            accountName: body.accountName ?? undefined,
            bsb: body.bsb ?? undefined,
          }),
        );
      },
    }),
    defineRoute({
      method: 'POST',
      url: '/api/members/:memberId/payment-methods/from-token',
      tag: 'Payment methods',
      summary: 'Add a payment method from a payment-provider token',
      description:
        "The token (e.g. a btok_ from capture-bank) is validated with the merchant's payment provider, which supplies type, last4 and the other details. Unknown token, another merchant's token, or a token already attached to another member: 400 naming providerToken. The same token for the same member returns the existing method with 200. Provider unreachable or timing out: 502 (safe to retry with backoff under a new Idempotency-Key: the same key replays the 502 with its outcome unknown; the same token for the same member then answers the method if the first call stored it). Requires an Idempotency-Key.",
      auth: { merchant: 'Staff' },
      idempotent: true,
      ownerOf,
      params: MemberParams,
      body: AddPaymentMethodFromTokenRequest,
      responses: { 200: PaymentMethod, 201: PaymentMethod, 400: null, 403: null, 404: null, 502: null },
      handler: async ({ params, body, principal }) => {
        assertSameId('memberId', body.memberId, params.memberId);
        return addedOrExisting(
          await methods.AddPaymentMethodFromToken({ scope: await callScope(access, principal, body.merchantId), memberId: params.memberId, providerToken: body.providerToken }),
        );
      },
    }),
    defineRoute({
      method: 'GET',
      url: '/api/members/:memberId/payment-methods',
      tag: 'Payment methods',
      summary: "List a member's payment methods in rank order",
      description: 'A plain array; the first (rank 1, isDefault true) is the default.',
      auth: { merchant: 'Viewer' },
      params: MemberParams,
      responses: { 200: z.array(PaymentMethod), 404: null },
      handler: async ({ params, principal }) => {
        const res = await methods.ListPaymentMethods({ scope: await callScope(access, principal), memberId: params.memberId });
        return ok(res.items.map(toPaymentMethod));
      },
    }),
    defineRoute({
      method: 'GET',
      url: '/api/members/:memberId/payment-methods/:id',
      tag: 'Payment methods',
      summary: 'Read a payment method',
      auth: { merchant: 'Viewer' },
      params: MemberParams.extend({ id: PathId }),
      responses: { 200: PaymentMethod, 404: null },
      handler: async ({ params, principal }) =>
        ok(toPaymentMethod(await methods.GetPaymentMethod({ scope: await callScope(access, principal), memberId: params.memberId, id: params.id }))),
    }),
    defineRoute({
      method: 'POST',
      url: '/api/members/:memberId/payment-methods/reorder',
      tag: 'Payment methods',
      summary: "Set a member's payment-method fallback ranking",
      description:
        "orderedIds must be exactly the member's method ids (none missing, none extra, none twice; null counts as empty), in the new order; the first becomes the default. Otherwise 400 naming orderedIds. Answers 200 with the methods in their new order. A body memberId differing from the path is 400; a body merchantId of another existing merchant is 403, of no merchant 404.",
      auth: { merchant: 'Staff' },
      params: MemberParams,
      body: ReorderPaymentMethodsRequest,
      responses: { 200: z.array(PaymentMethod), 400: null, 403: null, 404: null },
      handler: async ({ params, body, principal }) => {
        assertSameId('memberId', body.memberId, params.memberId);
        const scope = await callScope(access, principal, body.merchantId);
        const res = await methods.ReorderPaymentMethods({ scope, memberId: params.memberId, orderedIds: body.orderedIds ?? [] });
        return ok(res.items.map(toPaymentMethod));
      },
    }),
  ];
}
