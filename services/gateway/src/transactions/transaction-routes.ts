import { z } from 'zod';
import { DomainError, ListTransactionsQuery, Paged, PathId, RefundTransactionRequest, RetryTransactionRequest, toPage, Transaction, Uuid } from '@billing/contracts';
import { MoneyError, toMajorUnits, toMinorUnits } from '@billing/money';
import type { MerchantAccess } from '../auth/access.js';
import { PLATFORM_SCOPE } from '@billing/service-runtime';
import { callScope, merchantCallScope } from '../auth/call-scope.js';
import type { Backends } from '../backends/clients.js';
import { created, defineRoute, ok, type RouteSpec } from '../http/route.js';
import { assertSameId } from '../http/views.js';

/** Transaction message → REST: minor units become a decimal amount, once, here. */
export function toTransaction(msg: Record<string, any>): Transaction {
  return {
    id: msg.id,
    merchantId: msg.merchantId,
    memberId: msg.memberId,
    subscriptionId: msg.subscriptionId ?? null,
    paymentMethodId: msg.paymentMethodId ?? null,
    kind: msg.kind,
    amount: toMajorUnits(Number(msg.amountMinor), msg.currency),
    currency: msg.currency,
    status: msg.status,
    failureReason: msg.failureReason ?? null,
    attempt: msg.attempt,
    originalTransactionId: msg.originalTransactionId ?? null,
    occurredAt: msg.occurredAt,
    settledAt: msg.settledAt ?? null,
  };
}

const IdParams = z.object({ id: PathId });

export function transactionRoutes(backends: Backends, access: MerchantAccess): RouteSpec[] {
  const transactions = backends.billing.transactions;
  /** For the platform admin's Idempotency-Keys: the transaction's merchant. */
  const ownerOf = { param: 'id', merchantOf: async (id: string) => (await transactions.GetTransaction({ scope: PLATFORM_SCOPE, id })).merchantId };
  return [
    defineRoute({
      method: 'GET',
      url: '/api/Transactions',
      tag: 'Transactions',
      summary: "List a merchant's transactions",
      description: 'Oldest first (occurredAt). Filters: subscriptionId, status (Processing | Settled | Failed). merchantId defaults to the credential\'s merchant (required with the platform admin token). Amounts are positive decimals in major units on both kinds.',
      auth: { merchant: 'Viewer' },
      query: ListTransactionsQuery,
      responses: { 200: Paged(Transaction), 400: null, 403: null, 404: null },
      handler: async ({ query, principal }) => {
        const scope = await merchantCallScope(access, principal, query.merchantId);
        const res = await transactions.ListTransactions({ scope, subscriptionId: query.subscriptionId, status: query.status, page: query.page, pageSize: query.pageSize });
        return ok(toPage(res.items.map(toTransaction), res.totalCount, query));
      },
    }),
    defineRoute({
      method: 'GET',
      url: '/api/Transactions/:id',
      tag: 'Transactions',
      summary: 'Read a transaction',
      auth: { merchant: 'Viewer' },
      params: IdParams,
      responses: { 200: Transaction, 404: null },
      handler: async ({ params, principal }) => ok(toTransaction(await transactions.GetTransaction({ scope: await callScope(access, principal), id: params.id }))),
    }),
    defineRoute({
      method: 'POST',
      url: '/api/Transactions/:id/retry',
      tag: 'Transactions',
      summary: 'Retry a failed charge',
      description:
        "A Failed charge → 201: the same period is charged against the member's payment methods as they are now (the subscription's own first, then by rank) until one succeeds, each try a new Charge of attempt + 1 retrying the one before; the answer is the charge that settled or is processing, or, when every method declined, the last Failed try. Not a Failed charge, already retried, its period paid since (a later charge of it Settled or Processing), its subscription Paused or Cancelled (by hand or by the terminal action; a Paused one owing the period is retried by the billing runs once it is resumed), or a member with no payment method (nothing charged): 409. Provider unreachable: 502 (the new charge stays Processing and the next billing run completes it with the same provider idempotency key). Requires an Idempotency-Key.",
      auth: { merchant: 'Staff' },
      idempotent: true,
      ownerOf,
      params: IdParams,
      body: RetryTransactionRequest,
      responses: { 201: Transaction, 400: null, 404: null, 409: null, 502: null },
      handler: async ({ params, body, principal }) => {
        assertSameId('id', body.id, params.id);
        const t = toTransaction(await transactions.RetryTransaction({ scope: await callScope(access, principal, body.merchantId), id: params.id }));
        return created(t, `/api/Transactions/${t.id}`);
      },
    }),
    defineRoute({
      method: 'POST',
      url: '/api/Transactions/:id/refund',
      tag: 'Transactions',
      summary: 'Refund a settled charge',
      description:
        '`amount` (decimal, major units) defaults to the remaining refundable amount; partial refunds are allowed and all refunds of a charge together never exceed it, even when concurrent. amount ≤ 0: 400. Not a Settled charge, or more than is left: 409. Provider unreachable: 502. 201 with the Refund transaction (positive amount, originalTransactionId = the charge); emits transaction.refunded. Requires an Idempotency-Key.',
      auth: { merchant: 'Staff' },
      idempotent: true,
      ownerOf,
      params: IdParams,
      body: RefundTransactionRequest,
      responses: { 201: Transaction, 400: null, 404: null, 409: null, 502: null },
      handler: async ({ params, body, principal }) => {
        assertSameId('id', body.id, params.id);
        const scope = await callScope(access, principal, body.merchantId);
        let amountMinor: number | undefined;
        if (body.amount != null) {
          const charge = await transactions.GetTransaction({ scope, id: params.id });
          try {
            amountMinor = toMinorUnits(body.amount, charge.currency);
          } catch (e) {
            if (e instanceof MoneyError) throw DomainError.field('amount', e.message);
            throw e;
          }
          if (amountMinor <= 0) throw DomainError.field('amount', 'Must be greater than zero.');
        }
        const t = toTransaction(await transactions.RefundTransaction({ scope, id: params.id, amountMinor, reason: body.reason ?? undefined }));
        return created(t, `/api/Transactions/${t.id}`);
      },
    }),
  ];
}
