import { z } from 'zod';
import {
  FeeStatement,
  FeeStatementWithLines,
  GenerateFeeStatementRequest,
  ListFeeStatementsQuery,
  Paged,
  PagedStatementLines,
  PageQuery,
  PathId,
  PayFeeStatementRequest,
  type StatementLine,
  toPage,
} from '@billing/contracts';
import { toMajorUnits } from '@billing/money';
import type { Scope } from '@billing/proto-types/common/v1/Scope';
import type { MerchantAccess } from '../auth/access.js';
import { callScope, credentialScope, merchantCallScope } from '../auth/call-scope.js';
import type { Backends } from '../backends/clients.js';
import { created, defineRoute, ok, type RouteSpec } from '../http/route.js';

export function toFeeStatement(msg: Record<string, any>): FeeStatement {
  return {
    id: msg.id,
    merchantId: msg.merchantId,
    reference: msg.reference,
    periodStart: msg.periodStart,
    periodEnd: msg.periodEnd,
    status: msg.status,
    totalFees: toMajorUnits(Number(msg.totalFeesMinor), msg.currency),
    totalNet: toMajorUnits(Number(msg.totalNetMinor), msg.currency),
    transactionCount: msg.transactionCount,
    currency: msg.currency,
    finalisedAt: msg.finalisedAt ?? null,
    paidAt: msg.paidAt ?? null,
    createdAt: msg.createdAt,
    // Strings on every read (the resource table marks neither nullable): '' until pay sets them.
    paymentReference: msg.paymentReference ?? '',
    notes: msg.notes ?? '',
  };
}

const toLine = (currency: string) => (l: Record<string, any>): StatementLine => ({
  transactionId: l.transactionId,
  occurredAt: l.occurredAt,
  description: l.description,
  reference: l.reference,
  status: l.status,
  amount: toMajorUnits(Number(l.amountMinor), currency),
  feeAmount: toMajorUnits(Number(l.feeMinor), currency),
  netAmount: toMajorUnits(Number(l.netMinor), currency),
});

const IdParams = z.object({ id: PathId });
const StatementIdParams = z.object({ statementId: PathId });

const STATEMENT_RULES =
  'Lines are the merchant\'s Charge transactions with occurredAt in [periodStart, periodEnd) that are Settled or Processing (amount, feeAmount = the platform fee fixed when the charge was made, netAmount = amount - feeAmount), and its Refunds in the period (negative amount, feeAmount 0, negative netAmount), in the statement currency. Also a reversal line (status Failed, the billed line\'s amounts negated) for a charge or refund an earlier closed statement billed while Processing and that failed before this period\'s end (a bank debit at settlement, a refund the provider refused), once. totalFees, totalNet and transactionCount are the sums and count of the lines. Lines are taken at generate and again at finalise, then never change.';

export function feeStatementRoutes(backends: Backends, access: MerchantAccess): RouteSpec[] {
  const statements = backends.billing.feeStatements;
  const withLines = async (scope: Scope, statementMsg: Record<string, any>) => {
    const statement = toFeeStatement(statementMsg);
    const q = { page: 1, pageSize: 50 };
    const lines = await statements.ListFeeStatementLines({ scope, id: statement.id, ...q });
    return { statement, lines: toPage(lines.items.map(toLine(statement.currency)), lines.totalCount, q) };
  };
  return [
    defineRoute({
      method: 'POST',
      url: '/api/admin/fee-statements/generate',
      tag: 'Admin',
      summary: 'Generate a Draft fee statement for a merchant and period',
      description: `periodStart and periodEnd are dates or date-times (periodEnd after periodStart, else 400); currency, when not given, is the currency of the transactions that would be its lines: the period's charges and refunds, and the reversals of earlier statements' Processing lines that failed (AUD when there are none); when they are in several, 400 naming currency and them (generate one statement per currency, naming it). Unknown merchant: 404. A period whose fees or net amounts total more than the largest amount the API carries (999,999,999,999.99 in a currency with 2 decimal places): 422, nothing stored (generate over shorter periods); finalising such a Draft is 422 likewise. ${STATEMENT_RULES}`,
      auth: { admin: true },
      body: GenerateFeeStatementRequest,
      responses: { 201: FeeStatement, 400: null, 404: null, 422: null },
      handler: async ({ body, principal }) => {
        const s = toFeeStatement(await statements.GenerateFeeStatement({ scope: credentialScope(principal), merchantId: body.merchantId, periodStart: body.periodStart, periodEnd: body.periodEnd, currency: body.currency ?? undefined }));
        return created(s, `/api/FeeStatements/${s.id}`);
      },
    }),
    defineRoute({
      method: 'POST',
      url: '/api/admin/fee-statements/:id/finalise',
      tag: 'Admin',
      summary: 'Finalise a Draft fee statement',
      description: 'Draft → Finalised: the lines are taken a last time and frozen; emits fee_statement.finalised. Not Draft: 409. Totals then over the largest amount the API carries: 422, the Draft unchanged.',
      auth: { admin: true },
      params: IdParams,
      responses: { 200: FeeStatement, 404: null, 409: null, 422: null },
      handler: async ({ params, principal }) => ok(toFeeStatement(await statements.FinaliseFeeStatement({ scope: credentialScope(principal), id: params.id }))),
    }),
    defineRoute({
      method: 'POST',
      url: '/api/admin/fee-statements/:statementId/pay',
      tag: 'Admin',
      summary: 'Mark a Finalised fee statement as paid',
      description:
        'Finalised → Paid: records the out-of-band settlement (paidAt, paymentReference, notes); emits fee_statement.paid. The path identifies the statement: a different statementId in the body is ignored. 200 with the statement and page 1 of its lines (pageSize 50). Unknown: 404; not Finalised: 409.',
      auth: { admin: true },
      params: StatementIdParams,
      body: PayFeeStatementRequest,
      responses: { 200: FeeStatementWithLines, 400: null, 404: null, 409: null },
      handler: async ({ params, body, principal }) => {
        const scope = credentialScope(principal);
        const paid = await statements.PayFeeStatement({ scope, id: params.statementId, paymentReference: body.paymentReference ?? undefined, notes: body.notes ?? undefined });
        return ok(await withLines(scope, paid));
      },
    }),
    defineRoute({
      method: 'GET',
      url: '/api/admin/fee-statements',
      tag: 'Admin',
      summary: 'List fee statements',
      description: 'Oldest first; optional filters merchantId and status (Draft | Finalised | Paid). A merchantId that names no merchant is 404 (merchant-not-found), as everywhere a merchant is named.',
      auth: { admin: true },
      query: ListFeeStatementsQuery,
      responses: { 200: Paged(FeeStatement), 400: null, 404: null },
      handler: async ({ query, principal }) => {
        if (query.merchantId) await access.assert(principal, query.merchantId);
        const res = await statements.ListFeeStatements({ scope: credentialScope(principal), merchantId: query.merchantId, status: query.status, page: query.page, pageSize: query.pageSize });
        return ok(toPage(res.items.map(toFeeStatement), res.totalCount, query));
      },
    }),
    defineRoute({
      method: 'GET',
      url: '/api/FeeStatements',
      tag: 'Fee statements',
      summary: "List the merchant's fee statements",
      description: "Oldest first; optional status filter. merchantId defaults to the credential's merchant.",
      auth: { merchant: 'Viewer' },
      query: ListFeeStatementsQuery,
      responses: { 200: Paged(FeeStatement), 403: null, 404: null },
      handler: async ({ query, principal }) => {
        const scope = await merchantCallScope(access, principal, query.merchantId);
        const res = await statements.ListFeeStatements({ scope, status: query.status, page: query.page, pageSize: query.pageSize });
        return ok(toPage(res.items.map(toFeeStatement), res.totalCount, query));
      },
    }),
    defineRoute({
      method: 'GET',
      url: '/api/FeeStatements/:id',
      tag: 'Fee statements',
      summary: 'Read a fee statement',
      auth: { merchant: 'Viewer' },
      params: IdParams,
      responses: { 200: FeeStatement, 404: null },
      handler: async ({ params, principal }) => ok(toFeeStatement(await statements.GetFeeStatement({ scope: await callScope(access, principal), id: params.id }))),
    }),
    defineRoute({
      method: 'GET',
      url: '/api/FeeStatements/:id/lines',
      tag: 'Fee statements',
      summary: "A fee statement's lines, paged",
      description: `Ordered by occurredAt, then transactionId. ${STATEMENT_RULES}`,
      auth: { merchant: 'Viewer' },
      params: IdParams,
      query: PageQuery,
      responses: { 200: PagedStatementLines, 404: null },
      handler: async ({ params, query, principal }) => {
        const scope = await callScope(access, principal);
        const s = toFeeStatement(await statements.GetFeeStatement({ scope, id: params.id }));
        const res = await statements.ListFeeStatementLines({ scope, id: params.id, page: query.page, pageSize: query.pageSize });
        return ok(toPage(res.items.map(toLine(s.currency)), res.totalCount, query));
      },
    }),
  ];
}
