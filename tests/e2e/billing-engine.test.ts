import { randomUUID } from 'node:crypto';
import pg from 'pg';
import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { addPaymentMethod, BANK, CARD, createMember, idempotent } from '../support/billing-fixtures.js';
import { apiClient, createApiKey, createMerchant, createMerchantUser, eventually, unique, type ApiClient } from '../support/fixtures.js';
import { startTestPlatform, type TestPlatform } from '../support/platform.js';
import { eventsAgainstPublishedSchemas } from '../support/published-events.js';

/**
 * The billing engine end to end: billing runs with an explicit `asOf`, charges counted in the
 * sandbox provider's own ledger, refunds and retries, fee statements. Runs its own platform: it
 * kills billing mid-run, and its runs charge every due subscription of the database.
 */
let platform: TestPlatform;
let api: ApiClient;
let admin: string;
let sandbox: string;
let db: pg.Client;

beforeAll(async () => {
  platform = await startTestPlatform({
    services: ['sandbox-provider', 'identity', 'billing', 'checkout', 'gateway'],
    serviceEnv: { billing: { BILLING_CLAIM_LEASE_MS: '1500', PAYMENT_PROVIDER_TIMEOUT_MS: '1000', BILLING_RUN_CHUNK_SIZE: '7', BILLING_RUN_WORKERS: '2' } },
  });
  api = apiClient(platform.gatewayUrl!);
  admin = platform.adminToken;
  sandbox = platform.processes['sandbox-provider']!.address;
  db = new pg.Client({ connectionString: platform.databaseUrl });
  await db.connect();
}, 120_000);

afterAll(async () => {
  await db?.end();
  await platform?.stop();
});

// A run charges everything due in the database: each test starts with no live subscription of an
// earlier test, so the run's counts are its own.
beforeEach(async () => {
  await db.query(`update billing.subscriptions set status = 'Cancelled', next_billing_at = null, cancelled_at = now() where status <> 'Cancelled'`);
});

const T0 = '2030-01-15T00:00:00.000Z';
const day = (n: number, from = T0) => new Date(new Date(from).getTime() + n * 86_400_000).toISOString();

interface Ledger {
  charges: { id: string; amountMinor: number; status: string; idempotencyKey: string; paymentMethod: { last4: string } }[];
  refunds: { id: string; chargeId: string; amountMinor: number; idempotencyKey: string }[];
}

async function ledger(merchantId: string): Promise<Ledger> {
  const res = await fetch(`${sandbox}/__sandbox/ledger?account=${merchantId}`);
  return (await res.json()) as Ledger;
}

async function fault(merchantId: string, change: Record<string, unknown> | null) {
  if (change) await fetch(`${sandbox}/__sandbox/faults`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ ...change, account: merchantId }) });
  else await fetch(`${sandbox}/__sandbox/faults?account=${merchantId}`, { method: 'DELETE' });
}

async function run(asOf: string) {
  const res = await api.post('/api/admin/billing-runs', { asOf }, { token: admin });
  expect(res.status, JSON.stringify(res.body)).toBe(200);
  return res.body as { asOf: string; charged: number; succeeded: number; failed: number; retried: number; terminated: number; skipped: number };
}

/** A merchant with gateway credentials (unless `configured: false`), an API key, a product and a plan. */
async function billingMerchant(opts: { merchant?: Record<string, unknown>; plan?: Record<string, unknown>; configured?: boolean } = {}) {
  const m = await createMerchant(api, admin, opts.merchant ?? {});
  const { key } = await createApiKey(api, admin, m.id);
  if (opts.configured !== false) {
    const p = await api.put(`/api/admin/merchants/${m.id}/provider`, { providerEnvironment: 'Staging', gatewayUsername: 'gw', gatewayPassword: 'gw-secret' }, { token: admin });
    expect(p.status).toBe(200);
  }
  const product = await api.post('/api/Products', { merchantId: m.id, name: `P ${unique()}` }, { token: key });
  const plan = await api.post('/api/Plans', { merchantId: m.id, productId: product.body.id, name: 'Monthly', amount: 19.95, interval: 'Month', ...opts.plan }, { token: key });
  expect(plan.status).toBe(201);
  const merchant = { id: m.id, key, planId: plan.body.id as string };
  return {
    ...merchant,
    async subscriber(methods: Record<string, unknown>[] = [CARD], sub: Record<string, unknown> = {}) {
      const member = await createMember(api, merchant);
      for (const pm of methods) await addPaymentMethod(api, merchant, member.id, pm);
      const res = await api.post('/api/Subscriptions', { merchantId: m.id, memberId: member.id, planId: merchant.planId, startDate: T0, ...sub }, { token: key, headers: idempotent() });
      expect(res.status, JSON.stringify(res.body)).toBe(201);
      return res.body as { id: string; memberId: string };
    },
    sub: async (id: string) => (await api.get(`/api/Subscriptions/${id}`, { token: key })).body,
    transactions: async (subscriptionId: string) => (await api.get(`/api/Transactions?subscriptionId=${subscriptionId}&pageSize=200`, { token: key })).body.items as any[],
  };
}

const sumMinor = (xs: { amountMinor: number }[]) => xs.reduce((n, x) => n + x.amountMinor, 0);

/** Charges in attempt order (a manual retry occurs now, before a run's asOf in 2030; the API lists by occurredAt). */
const byAttempt = <T extends { attempt: number }>(ts: T[]) => [...ts].sort((a, b) => a.attempt - b.attempt);

async function outbox(type: string, field: string, id: string) {
  return (await db.query(`select data from billing.outbox where type = $1 and data->>$2 = $3`, [type, field, id])).rows.map((r) => r.data);
}

/** POSTs a subscription action (pause, resume, cancel) as the merchant. */
const act = (m: { key: string }, id: string, action: 'pause' | 'resume' | 'cancel', body: Record<string, unknown> = {}) =>
  api.post(`/api/Subscriptions/${id}/${action}`, body, { token: m.key, headers: idempotent() });

/** Adds `details` to the member's payment methods as the first in rank (the one charged first). */
async function firstMethod(m: { id: string; key: string }, memberId: string, details: Record<string, unknown>) {
  const added = await addPaymentMethod(api, m, memberId, details);
  const listed = await api.get(`/api/members/${memberId}/payment-methods`, { token: m.key });
  const others = (listed.body.items ?? listed.body).map((pm: { id: string }) => pm.id).filter((id: string) => id !== added.id);
  const res = await api.post(`/api/members/${memberId}/payment-methods/reorder`, { merchantId: m.id, memberId, orderedIds: [added.id, ...others] }, { token: m.key });
  expect(res.status, JSON.stringify(res.body)).toBe(200);
}

/** A subscription's charges as [attempt, status, the start of the period each pays for], oldest first. */
async function chargedPeriods(subscriptionId: string) {
  const res = await db.query(`select attempt, status, period_start from billing.transactions where subscription_id = $1 and kind = 'Charge' order by occurred_at, created_at`, [subscriptionId]);
  return res.rows.map((r) => [r.attempt, r.status, new Date(r.period_start).toISOString()]);
}


/** A statement of the merchant's period, generated and finalised, with its lines (read with the merchant's key). */
async function closedStatement(m: { id: string; key: string }, periodStart: string, periodEnd: string) {
  const gen = await api.post('/api/admin/fee-statements/generate', { merchantId: m.id, periodStart, periodEnd }, { token: admin });
  expect(gen.status, JSON.stringify(gen.body)).toBe(201);
  const fin = await api.post(`/api/admin/fee-statements/${gen.body.id}/finalise`, {}, { token: admin });
  expect(fin.status).toBe(200);
  const lines = await api.get(`/api/FeeStatements/${gen.body.id}/lines`, { token: m.key });
  return { ...fin.body, lines: lines.body.items } as { reference: string; totalFees: number; totalNet: number; transactionCount: number; lines: any[] };
}

/**
 * A subscriber of a 100.00 plan charged (Settled) by a run at T0, with a refund of that charge
 * (a fresh Idempotency-Key unless one is given) and the subscription's refunds.
 */
async function settledCharge() {
  const m = await billingMerchant({ plan: { amount: 100 } });
  const sub = await m.subscriber();
  await run(T0);
  const [charge] = await m.transactions(sub.id);
  const refund = (body: Record<string, unknown>, key = randomUUID()) => api.post(`/api/Transactions/${charge.id}/refund`, body, { token: m.key, headers: idempotent(key) });
  const refunds = async () => (await m.transactions(sub.id)).filter((t) => t.kind === 'Refund');
  return { m, sub, charge, refund, refunds };
}
describe('billing runs', () => {
  it('charges due card subscriptions in advance, once per period, and starts after the trial', async () => {
    const m = await billingMerchant();
    const trial = await billingMerchant({ plan: { trialDays: 14, amount: 5 } });
    const sub = await m.subscriber();
    const trialSub = await trial.subscriber();

    expect(await run(T0)).toEqual({ asOf: T0, charged: 1, succeeded: 1, failed: 0, retried: 0, terminated: 0, skipped: 0 });
    expect(await run(T0)).toMatchObject({ charged: 0, succeeded: 0 });
    const l = await ledger(m.id);
    expect(l.charges.map((c) => [c.amountMinor, c.status])).toEqual([[1995, 'Settled']]);
    expect((await ledger(trial.id)).charges).toEqual([]);

    const [t] = await m.transactions(sub.id);
    expect(t).toMatchObject({ kind: 'Charge', amount: 19.95, currency: 'AUD', status: 'Settled', attempt: 1, subscriptionId: sub.id, memberId: sub.memberId, failureReason: null, originalTransactionId: null, occurredAt: T0 });
    expect(l.charges[0]!.idempotencyKey).toBe(t.id);
    expect((await api.get(`/api/Transactions/${t.id}`, { token: m.key })).body).toEqual(t);
    expect((await api.get(`/api/Transactions?status=Failed`, { token: m.key })).body.totalCount).toBe(0);
    expect(await m.sub(sub.id)).toMatchObject({ status: 'Active', currentPeriodStart: T0, nextBillingAt: '2030-02-15T00:00:00.000Z' });
    const [event] = await outbox('transaction.succeeded', 'id', t.id);
    expect(event).toMatchObject({ transactionId: t.id, subscriptionId: sub.id, memberId: sub.memberId, merchantId: m.id, amount: 19.95, status: 'Settled' });

    expect(await run(day(14))).toMatchObject({ charged: 1, succeeded: 1 });
    expect((await ledger(trial.id)).charges.map((c) => c.amountMinor)).toEqual([500]);
    expect(await run('2030-02-15T00:00:00.000Z')).toMatchObject({ charged: 1, succeeded: 1 });
    expect(sumMinor((await ledger(m.id)).charges)).toBe(2 * 1995);
  });

  it('falls back to the second payment method when the first is declined', async () => {
    const m = await billingMerchant();
    const sub = await m.subscriber([{ ...CARD, last4: '0002' }, CARD]);
    expect(await run(T0)).toMatchObject({ charged: 1, succeeded: 1, failed: 0 });
    const txns = await m.transactions(sub.id);
    expect(txns.map((t) => [t.status, t.failureReason])).toEqual([['Failed', 'card_declined'], ['Settled', null]]);
    expect(txns[0].paymentMethodId).not.toBe(txns[1].paymentMethodId);
    const l = await ledger(m.id);
    expect(l.charges.map((c) => [c.paymentMethod.last4, c.status])).toEqual([['0002', 'Failed'], ['4242', 'Settled']]);
    expect(sumMinor(l.charges.filter((c) => c.status === 'Settled'))).toBe(1995);
    expect((await m.sub(sub.id)).status).toBe('Active');
  });

  it("charges the subscription's own payment method first, then the member's others in rank order", async () => {
    // Regression: paymentMethodId was stored and validated but never charged; rank 1 was.
    const m = await billingMerchant();
    const member = await createMember(api, m);
    const first = await addPaymentMethod(api, m, member.id, CARD);
    const named = await addPaymentMethod(api, m, member.id, { ...CARD, last4: '1111' });
    const subscribe = async (paymentMethodId: string) => {
      const res = await api.post('/api/Subscriptions', { merchantId: m.id, memberId: member.id, planId: m.planId, startDate: T0, paymentMethodId }, { token: m.key, headers: idempotent() });
      expect(res.status, JSON.stringify(res.body)).toBe(201);
      return res.body as { id: string };
    };
    const sub = await subscribe(named.id);
    expect(await run(T0)).toMatchObject({ charged: 1, succeeded: 1 });
    expect((await m.transactions(sub.id)).map((t) => [t.paymentMethodId, t.status])).toEqual([[named.id, 'Settled']]);

    // The named method declining, the member's first-ranked one pays.
    const other = await billingMerchant();
    const otherMember = await createMember(api, other);
    const good = await addPaymentMethod(api, other, otherMember.id, CARD);
    const declining = await addPaymentMethod(api, other, otherMember.id, { ...CARD, last4: '0002' });
    const res = await api.post('/api/Subscriptions', { merchantId: other.id, memberId: otherMember.id, planId: other.planId, startDate: T0, paymentMethodId: declining.id }, { token: other.key, headers: idempotent() });
    expect(await run(T0)).toMatchObject({ charged: 1, succeeded: 1 });
    expect((await other.transactions(res.body.id)).map((t) => [t.paymentMethodId, t.status])).toEqual([[declining.id, 'Failed'], [good.id, 'Settled']]);
    expect(first.id).not.toBe(named.id);
  });

  it('fails a charge the provider refuses for good (unknown token) with provider_rejected, falls back, and retries it like a decline', async () => {
    const m = await billingMerchant({ merchant: { billingRetryOffsetsDays: '1' } });
    const both = await m.subscriber([{ ...CARD, last4: '1111' }, CARD]);
    const only = await m.subscriber([{ ...CARD, last4: '1111' }]);
    // Tokens the sandbox does not know (as after a provider-side reset): it answers 400 token_not_found.
    await db.query(`update billing.payment_methods set provider_token = 'ctok_unknown_' || id where merchant_id = $1 and last4 = '1111'`, [m.id]);

    expect(await run(T0)).toMatchObject({ charged: 2, succeeded: 1, failed: 1, retried: 0 });
    expect((await m.transactions(both.id)).map((t) => [t.status, t.failureReason])).toEqual([['Failed', 'provider_rejected'], ['Settled', null]]);
    expect((await m.sub(both.id)).status).toBe('Active');
    expect((await m.transactions(only.id)).map((t) => [t.status, t.failureReason, t.attempt])).toEqual([['Failed', 'provider_rejected', 1]]);
    expect(await m.sub(only.id)).toMatchObject({ status: 'PastDue', nextBillingAt: day(1) });
    expect(await outbox('subscription.past_due', 'id', only.id)).toHaveLength(1);
    // Confirmed, not left for the next run to repeat; the refused calls charged nothing.
    expect(await run(T0)).toMatchObject({ charged: 0 });
    expect((await ledger(m.id)).charges.map((c) => [c.paymentMethod.last4, c.status])).toEqual([['4242', 'Settled']]);

    // The retry is due as after a decline; with the method usable again it collects the period.
    await db.query(`update billing.payment_methods set provider_token = null where merchant_id = $1 and last4 = '1111'`, [m.id]);
    expect(await run(day(1))).toMatchObject({ charged: 1, succeeded: 1, failed: 0, retried: 1 });
    expect(await m.sub(only.id)).toMatchObject({ status: 'Active', currentPeriodStart: T0 });
    // A receiver following subscriptions by their events learns it is Active again, at the run's clock.
    expect((await outbox('subscription.recovered', 'id', only.id)).map((d) => [d.status, d.updatedAt])).toEqual([['Active', day(1)]]);
    expect(await outbox('subscription.recovered', 'id', both.id)).toEqual([]);
    const l = await ledger(m.id);
    expect(l.charges.map((c) => [c.paymentMethod.last4, c.status])).toEqual([['4242', 'Settled'], ['1111', 'Settled']]);
    expect(sumMinor(l.charges)).toBe(2 * 1995);
  });

  it('walks the retry ladder to the terminal action as asOf steps through the days', async () => {
    const cancel = await billingMerchant({ merchant: { billingRetryOffsetsDays: '1,3' } });
    const pause = await billingMerchant({ merchant: { billingRetryOffsetsDays: '2', billingTerminalAction: 'Pause' } });
    const declined = [{ ...CARD, last4: '0002' }];
    const c = await cancel.subscriber(declined);
    const p = await pause.subscriber(declined);

    expect(await run(T0)).toMatchObject({ charged: 2, succeeded: 0, failed: 2, retried: 0, terminated: 0 });
    expect(await cancel.sub(c.id)).toMatchObject({ status: 'PastDue', nextBillingAt: day(1) });
    expect(await pause.sub(p.id)).toMatchObject({ status: 'PastDue', nextBillingAt: day(2) });
    expect(await run(day(1))).toMatchObject({ charged: 1, failed: 1, retried: 1, terminated: 0 });
    expect(await cancel.sub(c.id)).toMatchObject({ status: 'PastDue', nextBillingAt: day(3) });
    expect(await run(day(2))).toMatchObject({ charged: 1, failed: 1, retried: 1, terminated: 1 });
    expect((await pause.sub(p.id)).status).toBe('Paused');
    expect(await run(day(3))).toMatchObject({ charged: 1, failed: 1, retried: 1, terminated: 1 });
    expect(await cancel.sub(c.id)).toMatchObject({ status: 'Cancelled', nextBillingAt: null });
    expect(await run(day(30))).toMatchObject({ charged: 0 });

    // The schedule's retries are tied to the period by subscription and attempt, not to the charge before (as the API reference says).
    expect((await cancel.transactions(c.id)).map((t) => t.originalTransactionId)).toEqual([null, null, null]);
    expect((await cancel.transactions(c.id)).map((t) => [t.status, t.attempt, t.occurredAt])).toEqual([
      ['Failed', 1, T0],
      ['Failed', 2, day(1)],
      ['Failed', 3, day(3)],
    ]);
    expect((await ledger(cancel.id)).charges).toHaveLength(3);
    expect((await ledger(pause.id)).charges).toHaveLength(2);
    expect(await outbox('subscription.past_due', 'id', c.id)).toHaveLength(1);
    expect(await outbox('subscription.cancelled', 'id', c.id)).toHaveLength(1);
    expect(await outbox('subscription.paused', 'id', p.id)).toHaveLength(1);
    expect(await outbox('transaction.failed', 'subscriptionId', c.id)).toHaveLength(3);
  });

  it('settles bank charges after the settlement window; accounts ending 002 fail then', async () => {
    const m = await billingMerchant({ merchant: { bankSettlementWindowDays: 3 } });
    const ok = await m.subscriber([BANK]);
    const poor = await m.subscriber([{ ...BANK, last4: '5002' }]);
    expect(await run(T0)).toMatchObject({ charged: 2, succeeded: 2 });
    expect((await m.transactions(ok.id)).map((t) => t.status)).toEqual(['Processing']);
    await run(day(2));
    expect((await m.transactions(poor.id)).map((t) => t.status)).toEqual(['Processing']);
    await run(day(3));
    expect((await m.transactions(ok.id)).map((t) => [t.status, t.settledAt])).toEqual([['Settled', day(3)]]);
    expect((await m.transactions(poor.id)).map((t) => [t.status, t.failureReason])).toEqual([['Failed', 'insufficient_funds']]);
    expect(await m.sub(ok.id)).toMatchObject({ status: 'Active', nextBillingAt: '2030-02-15T00:00:00.000Z' });
    expect(await m.sub(poor.id)).toMatchObject({ status: 'PastDue' });
    expect((await ledger(m.id)).charges.map((c) => c.status).sort()).toEqual(['Failed', 'Settled']);
  });

  it('retries a period whose bank debit failed at settlement on the member\'s other methods first', async () => {
    const m = await billingMerchant({ merchant: { bankSettlementWindowDays: 3, billingRetryOffsetsDays: '1,3' } });
    // The bank account is ranked first: its debit is Processing at once and fails only at settlement.
    const sub = await m.subscriber([{ ...BANK, last4: '8002' }, CARD]);
    expect(await run(T0)).toMatchObject({ charged: 1, failed: 0 });
    expect(await run(day(3))).toMatchObject({ failed: 1 });
    // The retry charges the card, not the bank account again: the period is collected.
    expect(await run(day(4))).toMatchObject({ charged: 1, retried: 1, succeeded: 1 });
    expect(await m.sub(sub.id)).toMatchObject({ status: 'Active', currentPeriodStart: T0, nextBillingAt: '2030-02-15T00:00:00.000Z' });
    const txns = byAttempt(await m.transactions(sub.id));
    const methods = (await api.get(`/api/members/${sub.memberId}/payment-methods`, { token: m.key })).body as { id: string; type: string }[];
    const card = methods.find((pm) => pm.type === 'Card')!;
    expect(txns.map((t) => [t.attempt, t.status, t.paymentMethodId === card.id ? 'card' : 'bank'])).toEqual([
      [1, 'Failed', 'bank'],
      [2, 'Settled', 'card'],
    ]);
  });

  it('charges a subscription made by a hosted checkout on the method captured there only, never on the methods of the member whose email the visitor gave', async () => {
    const m = await billingMerchant({ merchant: { bankSettlementWindowDays: 3, billingRetryOffsetsDays: '1,5' } });
    const email = `victim-${unique()}@example.com`;
    const victim = await api.post('/api/Members', { merchantId: m.id, email, firstName: 'Victor', lastName: 'Victim' }, { token: m.key });
    expect(victim.status).toBe(201);
    await addPaymentMethod(api, m, victim.body.id, CARD);
    // An anonymous visitor opens a generic link, gives the victim's email and a bank account whose debits fail at settlement.
    const link = await api.post('/api/Checkout/links', { merchantId: m.id, planId: m.planId, returnUrl: 'https://shop.example/done' }, { token: m.key });
    const resolved = await api.post('/api/Checkout/sessions/resolve', { d: link.body.d, s: link.body.s });
    const token = resolved.body.sessionToken as string;
    const sessionId = resolved.body.sessionId as string;
    expect((await api.patch('/api/Checkout/sessions/me/customer', { email, firstName: 'Anyone', lastName: 'Else' }, { token })).status).toBe(204);
    const bank = await api.post('/api/Checkout/sessions/me/capture-bank', { sessionId, accountName: 'Anyone Else', bsb: '062-000', accountNumber: '1110002' }, { token });
    const completed = await api.post('/api/Checkout/sessions/me/complete', { sessionId, providerToken: bank.body.providerToken }, { token });
    expect(completed.status, JSON.stringify(completed.body)).toBe(200);
    const [sub] = (await api.get(`/api/Subscriptions?merchantId=${m.id}&memberId=${victim.body.id}`, { token: m.key })).body.items;

    // The first debit fails at settlement; the run's retry and a manual retry debit the visitor's
    // account again, never the victim's card.
    const at = (days: number) => new Date(Date.parse(sub.createdAt) + days * 86_400_000 + 60_000).toISOString();
    expect(await run(at(0))).toMatchObject({ charged: 1, failed: 0 });
    expect(await run(at(3))).toMatchObject({ failed: 1 });
    expect(await run(at(4))).toMatchObject({ charged: 1, retried: 1, failed: 0 });
    expect(await run(at(7))).toMatchObject({ charged: 0, failed: 1 });
    expect(await m.sub(sub.id)).toMatchObject({ status: 'PastDue' });
    const failed = byAttempt(await m.transactions(sub.id)).at(-1);
    const retry = await api.post(`/api/Transactions/${failed.id}/retry`, {}, { token: m.key, headers: idempotent() });
    expect(retry.status, JSON.stringify(retry.body)).toBe(201);
    expect(retry.body).toMatchObject({ status: 'Processing', paymentMethodId: sub.paymentMethodId });
    expect((await m.transactions(sub.id)).map((t) => t.paymentMethodId)).toEqual([sub.paymentMethodId, sub.paymentMethodId, sub.paymentMethodId]);
    expect((await ledger(m.id)).charges.map((c) => c.paymentMethod.last4)).toEqual(['0002', '0002', '0002']);
  });

  it('retries by hand a period whose bank debit failed at settlement on the member\'s other methods first', async () => {
    const m = await billingMerchant({ merchant: { bankSettlementWindowDays: 3 } });
    const sub = await m.subscriber([{ ...BANK, last4: '8002' }, CARD]);
    expect(await run(T0)).toMatchObject({ charged: 1, failed: 0 });
    expect(await run(day(3))).toMatchObject({ failed: 1 });
    const [failed] = await m.transactions(sub.id);
    const retry = await api.post(`/api/Transactions/${failed.id}/retry`, {}, { token: m.key, headers: idempotent() });
    expect(retry.status, JSON.stringify(retry.body)).toBe(201);
    const methods = (await api.get(`/api/members/${sub.memberId}/payment-methods`, { token: m.key })).body as { id: string; type: string }[];
    const card = methods.find((pm) => pm.type === 'Card')!;
    // The card, not the bank account again: the period is collected at once.
    expect(retry.body).toMatchObject({ attempt: 2, status: 'Settled', paymentMethodId: card.id, originalTransactionId: failed.id });
    expect(await m.sub(sub.id)).toMatchObject({ status: 'Active', currentPeriodStart: T0 });
    expect((await ledger(m.id)).charges.map((c) => c.paymentMethod.last4)).toEqual(['8002', '4242']);
  });

  it('walks the retry ladder with bank debits that fail at settlement, and does not bill the next period while one is unsettled', async () => {
    // Weekly, offsets 1 and 3 days, a 3-day window: retries that fail only at settlement.
    const m = await billingMerchant({ merchant: { bankSettlementWindowDays: 3, billingRetryOffsetsDays: '1,3' }, plan: { interval: 'Week' } });
    const poor = await m.subscriber([{ ...BANK, last4: '9002' }]);
    expect(await run(T0)).toMatchObject({ charged: 1, failed: 0 });
    expect(await run(day(3))).toMatchObject({ failed: 1 }); // attempt 1 fails at settlement: dunning from day 3
    expect(await m.sub(poor.id)).toMatchObject({ status: 'PastDue', nextBillingAt: day(4) });
    expect(await run(day(4))).toMatchObject({ charged: 1, retried: 1, failed: 0 }); // retry 1 (attempt 2), Processing
    expect(await m.sub(poor.id)).toMatchObject({ status: 'Active', nextBillingAt: day(7) });
    // Day 7: the next period is due, but retry 1 is still unsettled: it settles first (fails),
    // and retry 2 (due at day 3 + 3) is made instead, for the period still owed.
    expect(await run(day(7))).toMatchObject({ charged: 1, retried: 1, failed: 1, terminated: 0 });
    expect(await m.sub(poor.id)).toMatchObject({ status: 'Active', currentPeriodStart: T0, nextBillingAt: day(7) });
    expect(await run(day(8))).toMatchObject({ charged: 0 }); // retry 2 unsettled: the next period waits
    // Day 10: retry 2, the last, fails at settlement: the terminal action, Cancel.
    expect(await run(day(10))).toMatchObject({ charged: 0, failed: 1, terminated: 1 });
    expect(await m.sub(poor.id)).toMatchObject({ status: 'Cancelled' });
    expect((await m.transactions(poor.id)).map((t) => [t.attempt, t.status, t.occurredAt, t.failureReason])).toEqual([
      [1, 'Failed', T0, 'insufficient_funds'],
      [2, 'Failed', day(4), 'insufficient_funds'],
      [3, 'Failed', day(7), 'insufficient_funds'],
    ]);
    expect(await outbox('subscription.cancelled', 'id', poor.id)).toHaveLength(1);
  });

  it('keeps the period of a bank debit that fails at settlement while the subscription is paused: resumed, it is PastDue and the next run collects it once', async () => {
    const m = await billingMerchant({ merchant: { bankSettlementWindowDays: 3, billingRetryOffsetsDays: '1,3' } });
    const poor = await m.subscriber([{ ...BANK, last4: '7002' }]);
    expect(await run(T0)).toMatchObject({ charged: 1, succeeded: 1 });
    expect(await m.sub(poor.id)).toMatchObject({ status: 'Active', nextBillingAt: '2030-02-15T00:00:00.000Z' });
    expect((await act(m, poor.id, 'pause')).body).toMatchObject({ status: 'Paused' });

    // Day 3: the debit fails at settlement; the subscription stays Paused, owing the period, its
    // first retry at day 3 + 1, held while it is paused.
    expect(await run(day(3))).toMatchObject({ charged: 0, failed: 1 });
    expect((await m.transactions(poor.id)).map((t) => [t.attempt, t.status, t.failureReason])).toEqual([[1, 'Failed', 'insufficient_funds']]);
    expect(await m.sub(poor.id)).toMatchObject({ status: 'Paused', currentPeriodStart: T0, nextBillingAt: day(4) });
    expect(await run(day(5))).toMatchObject({ charged: 0 });
    expect(await outbox('subscription.past_due', 'id', poor.id)).toEqual([]);

    await firstMethod(m, poor.memberId, CARD);
    const resumed = await act(m, poor.id, 'resume');
    expect(resumed.status).toBe(200);
    expect(resumed.body).toMatchObject({ status: 'PastDue', currentPeriodStart: T0, nextBillingAt: day(4), pausedAt: null });
    expect((await outbox('subscription.past_due', 'id', poor.id)).map((d) => d.status)).toEqual(['PastDue']);

    // The retry of the unpaid period (attempt 2) settles on the card: that period is paid, once.
    expect(await run(day(5))).toMatchObject({ charged: 1, retried: 1, succeeded: 1, failed: 0 });
    expect(await m.sub(poor.id)).toMatchObject({ status: 'Active', currentPeriodStart: T0, nextBillingAt: '2030-02-15T00:00:00.000Z' });
    expect(await run(day(6))).toMatchObject({ charged: 0 });
    expect(await chargedPeriods(poor.id)).toEqual([[1, 'Failed', T0], [2, 'Settled', T0]]);
    expect((await ledger(m.id)).charges.map((c) => [c.paymentMethod.last4, c.status])).toEqual([['7002', 'Failed'], ['4242', 'Settled']]);
  });

  it('collects a period that failed at settlement while paused when a resumeAt after its end comes, then bills the period started at the resume', async () => {
    const m = await billingMerchant({ merchant: { bankSettlementWindowDays: 3, billingRetryOffsetsDays: '1,3' }, plan: { interval: 'Week', amount: 10 } });
    const poor = await m.subscriber([{ ...BANK, last4: '7002' }]);
    expect(await run(T0)).toMatchObject({ charged: 1, succeeded: 1 });
    expect((await act(m, poor.id, 'pause', { resumeAt: day(10) })).body).toMatchObject({ status: 'Paused', resumeAt: day(10) });
    expect(await run(day(3))).toMatchObject({ charged: 0, failed: 1 });
    expect(await m.sub(poor.id)).toMatchObject({ status: 'Paused', nextBillingAt: day(4) });
    expect(await run(day(7))).toMatchObject({ charged: 0 });
    await firstMethod(m, poor.memberId, CARD);

    // Day 10: resumed PastDue (the week from T0 is owed) into a new week from day 10; the owed
    // week is retried at once and settles, then the new week is due.
    expect(await run(day(10))).toMatchObject({ charged: 1, retried: 1, succeeded: 1, failed: 0 });
    expect(await m.sub(poor.id)).toMatchObject({ status: 'Active', currentPeriodStart: day(10), nextBillingAt: day(10) });
    expect((await outbox('subscription.resumed', 'id', poor.id)).map((d) => d.status)).toEqual(['PastDue']);
    expect(await outbox('subscription.past_due', 'id', poor.id)).toHaveLength(1);
    expect(await run(day(10))).toMatchObject({ charged: 1, retried: 0, succeeded: 1 });
    expect(await m.sub(poor.id)).toMatchObject({ status: 'Active', currentPeriodStart: day(10), nextBillingAt: day(17) });
    expect(await run(day(16))).toMatchObject({ charged: 0 });
    expect(await chargedPeriods(poor.id)).toEqual([[1, 'Failed', T0], [2, 'Settled', T0], [1, 'Settled', day(10)]]);
    expect(sumMinor((await ledger(m.id)).charges.filter((c) => c.status === 'Settled'))).toBe(2 * 1000);
  });

  it('collects a period whose bank debit fails at settlement after cancel at period end, then ends the subscription at that period end', async () => {
    const m = await billingMerchant({ merchant: { bankSettlementWindowDays: 3, billingRetryOffsetsDays: '1,3' } });
    const poor = await m.subscriber([{ ...BANK, last4: '7002' }]);
    expect(await run(T0)).toMatchObject({ charged: 1, succeeded: 1 });
    expect((await act(m, poor.id, 'cancel', { atPeriodEnd: true })).body).toMatchObject({ status: 'Active', cancelAtPeriodEnd: true });
    expect(await run(day(3))).toMatchObject({ failed: 1 });
    expect(await m.sub(poor.id)).toMatchObject({ status: 'PastDue', cancelAtPeriodEnd: true, nextBillingAt: day(4) });
    expect(await outbox('subscription.past_due', 'id', poor.id)).toHaveLength(1);
    await firstMethod(m, poor.memberId, CARD);
    expect(await run(day(4))).toMatchObject({ charged: 1, retried: 1, succeeded: 1 });
    expect(await m.sub(poor.id)).toMatchObject({ status: 'Active', cancelAtPeriodEnd: true, nextBillingAt: '2030-02-15T00:00:00.000Z' });
    expect(await run('2030-02-15T00:00:00.000Z')).toMatchObject({ charged: 0, terminated: 1 });
    expect(await m.sub(poor.id)).toMatchObject({ status: 'Cancelled' });
    expect(await chargedPeriods(poor.id)).toEqual([[1, 'Failed', T0], [2, 'Settled', T0]]);
  });

  it('retries a declined card once per run even when several retry dates have passed, counting subscriptions', async () => {
    const m = await billingMerchant({ merchant: { billingRetryOffsetsDays: '1,3,7' } });
    const declined = await m.subscriber([{ ...CARD, last4: '0002' }]);
    expect(await run(T0)).toMatchObject({ charged: 1, failed: 1 });
    // Every retry date has passed by day 20: one retry per run, each run's counts of one subscription.
    expect(await run(day(20))).toEqual({ asOf: day(20), charged: 1, succeeded: 0, failed: 1, retried: 1, terminated: 0, skipped: 0 });
    expect(await run(day(20))).toMatchObject({ charged: 1, failed: 1, retried: 1, terminated: 0 });
    expect(await run(day(20))).toMatchObject({ charged: 1, failed: 1, retried: 1, terminated: 1 });
    expect((await m.transactions(declined.id)).map((t) => t.attempt)).toEqual([1, 2, 3, 4]);
    expect((await ledger(m.id)).charges).toHaveLength(4);
  });

  it('charges a subscription behind by several periods for one period per run, never several at once', async () => {
    const m = await billingMerchant({ plan: { interval: 'Week', amount: 10 } });
    const behind = await m.subscriber();
    // By day 15 three weekly periods are due (from T0, day 7 and day 14): each run charges one.
    for (const [n, next] of [[1, day(7)], [2, day(14)], [3, day(21)]] as const) {
      expect(await run(day(15))).toEqual({ asOf: day(15), charged: 1, succeeded: 1, failed: 0, retried: 0, terminated: 0, skipped: 0 });
      expect((await ledger(m.id)).charges).toHaveLength(n);
      expect(await m.sub(behind.id)).toMatchObject({ status: 'Active', nextBillingAt: next });
    }
    expect(await run(day(15))).toMatchObject({ charged: 0, succeeded: 0 });
    const charges = await m.transactions(behind.id);
    expect(charges.map((t) => [t.amount, t.status, t.occurredAt])).toEqual(Array(3).fill([10, 'Settled', day(15)]));
  });

  it('charges a new subscription cancelled at period end for its first period, and ends it when that period ends', async () => {
    const m = await billingMerchant();
    const sub = await m.subscriber();
    const cancel = await api.post(`/api/Subscriptions/${sub.id}/cancel`, { atPeriodEnd: true }, { token: m.key, headers: idempotent() });
    expect(cancel.body).toMatchObject({ status: 'Active', cancelAtPeriodEnd: true, nextBillingAt: T0 });
    expect(await run(T0)).toEqual({ asOf: T0, charged: 1, succeeded: 1, failed: 0, retried: 0, terminated: 0, skipped: 0 });
    expect(await m.sub(sub.id)).toMatchObject({ status: 'Active', cancelAtPeriodEnd: true, currentPeriodStart: T0, currentPeriodEnd: '2030-02-15T00:00:00.000Z' });
    expect(await run(day(30))).toMatchObject({ charged: 0, terminated: 0 });
    expect(await run('2030-02-15T00:00:00.000Z')).toMatchObject({ charged: 0, succeeded: 0, terminated: 1 });
    expect(await m.sub(sub.id)).toMatchObject({ status: 'Cancelled', cancelledAt: '2030-02-15T00:00:00.000Z' });
    expect((await ledger(m.id)).charges.map((c) => c.amountMinor)).toEqual([1995]);
  });

  it('a subscription paused while its charge is in flight keeps the period it paid: resumed, it is not charged for it again', async () => {
    const m = await billingMerchant();
    const sub = await m.subscriber();
    // Under billing's PAYMENT_PROVIDER_TIMEOUT_MS here (1 s), so the run hears the answer.
    await fault(m.id, { latencyMs: 700 });
    const running = run(T0);
    // The Processing charge is committed before the provider is called: pause while it is called.
    await eventually(async () => (await m.transactions(sub.id)).length > 0, 20_000, 20);
    const paused = await act(m, sub.id, 'pause');
    expect(paused.status).toBe(200);
    expect(await running).toMatchObject({ charged: 1, succeeded: 1 });
    await fault(m.id, null);
    expect(await m.sub(sub.id)).toMatchObject({ status: 'Paused', currentPeriodStart: T0, nextBillingAt: '2030-02-15T00:00:00.000Z' });
    expect((await act(m, sub.id, 'resume')).body).toMatchObject({ status: 'Active', currentPeriodStart: T0, nextBillingAt: '2030-02-15T00:00:00.000Z' });
    expect(await run(T0)).toMatchObject({ charged: 0 });
    expect((await m.transactions(sub.id)).map((t) => t.status)).toEqual(['Settled']);
    expect((await ledger(m.id)).charges).toHaveLength(1);
  }, 60_000);

  it('a subscription cancelled while its charge is in flight is Cancelled once the charge is answered; the charge stands and the run counts it succeeded', async () => {
    const m = await billingMerchant();
    const sub = await m.subscriber();
    await fault(m.id, { latencyMs: 700 });
    const running = run(T0);
    await eventually(async () => (await m.transactions(sub.id)).length > 0, 20_000, 20);
    expect((await act(m, sub.id, 'cancel')).body).toMatchObject({ status: 'Cancelled' });
    // Counted: every charged subscription is succeeded or failed in the report (it was neither).
    expect(await running).toMatchObject({ charged: 1, succeeded: 1, failed: 0 });
    await fault(m.id, null);
    expect(await m.sub(sub.id)).toMatchObject({ status: 'Cancelled' });
    expect((await m.transactions(sub.id)).map((t) => t.status)).toEqual(['Settled']);
    expect((await ledger(m.id)).charges).toHaveLength(1);
  }, 60_000);

  it('decides a cancel sent while a renewal is in flight on what the charge left: the paid period shown, and cancel at period end charges nothing more (a charge after the answered cancel)', async () => {
    const m = await billingMerchant();
    const [now, atEnd] = [await m.subscriber(), await m.subscriber()];
    expect(await run(T0)).toMatchObject({ charged: 2, succeeded: 2 });
    const ledgerBefore = (await ledger(m.id)).charges.length;
    await fault(m.id, { latencyMs: 800 });
    const renewal = run(day(31));
    // Both renewals are out at the provider (the run recorded them Processing) when the cancels arrive.
    await eventually(async () => (await m.transactions(now.id)).length === 2 && (await m.transactions(atEnd.id)).length === 2, 20_000, 20);
    const [cancelled, setToEnd] = await Promise.all([act(m, now.id, 'cancel'), act(m, atEnd.id, 'cancel', { atPeriodEnd: true })]);
    expect(await renewal).toMatchObject({ charged: 2, succeeded: 2 });
    await fault(m.id, null);
    // Answered after the renewal was recorded: the answers show the period it paid (they showed the old one).
    expect(cancelled.status, JSON.stringify(cancelled.body)).toBe(200);
    expect(cancelled.body).toMatchObject({ status: 'Cancelled', currentPeriodStart: '2030-02-15T00:00:00.000Z', currentPeriodEnd: '2030-03-15T00:00:00.000Z', cancelAtPeriodEnd: false });
    expect(setToEnd.body).toMatchObject({ status: 'Active', cancelAtPeriodEnd: true, currentPeriodEnd: '2030-03-15T00:00:00.000Z' });
    expect(await m.sub(atEnd.id)).toMatchObject({ status: 'Active', cancelAtPeriodEnd: true, currentPeriodEnd: '2030-03-15T00:00:00.000Z' });
    // The run at that period end cancels it instead of charging; nothing is charged after either answer.
    expect(await run('2030-03-15T00:00:00.000Z')).toMatchObject({ charged: 0 });
    expect(await m.sub(atEnd.id)).toMatchObject({ status: 'Cancelled' });
    expect((await ledger(m.id)).charges).toHaveLength(ledgerBefore + 2);
  }, 60_000);

  it('a charge declined after its subscription was paused in flight counts failed in the run (a cancel then was neither), and no other method is tried', async () => {
    const m = await billingMerchant();
    const sub = await m.subscriber([{ ...CARD, last4: '0002' }, CARD]);
    await fault(m.id, { latencyMs: 700 });
    const running = run(T0);
    await eventually(async () => (await m.transactions(sub.id)).length > 0, 20_000, 20);
    // A pause is applied at once (a cancel waits for the charge's answer, see above).
    expect((await act(m, sub.id, 'pause')).body).toMatchObject({ status: 'Paused' });
    // Every charge answered is counted once: charged = succeeded + failed.
    expect(await running).toMatchObject({ charged: 1, succeeded: 0, failed: 1 });
    await fault(m.id, null);
    expect(await m.sub(sub.id)).toMatchObject({ status: 'Paused' });
    expect((await m.transactions(sub.id)).map((t) => [t.status, t.failureReason])).toEqual([['Failed', 'card_declined']]);
    expect((await ledger(m.id)).charges.map((c) => c.paymentMethod.last4)).toEqual(['0002']);
    expect(await run(T0)).toMatchObject({ charged: 0, failed: 0 });
  }, 60_000);

  it('ends at its period end a subscription set to cancel then and paused since, however it is resumed, and charges it nothing more', async () => {
    const m = await billingMerchant();
    const [byRun, byResumeAt, byResume] = [await m.subscriber(), await m.subscriber(), await m.subscriber([CARD], { startDate: day(-45, new Date().toISOString()) })];
    expect(await run(T0)).toMatchObject({ charged: 3, succeeded: 3 });
    for (const s of [byRun, byResumeAt, byResume]) expect((await act(m, s.id, 'cancel', { atPeriodEnd: true })).body).toMatchObject({ status: 'Active', cancelAtPeriodEnd: true });
    expect((await act(m, byRun.id, 'pause')).status).toBe(200);
    expect((await act(m, byResumeAt.id, 'pause', { resumeAt: day(40) })).status).toBe(200);
    expect((await act(m, byResume.id, 'pause')).status).toBe(200);

    // The third's period (started 45 days ago) ended while it was paused: resuming it now cancels it.
    const resumed = await act(m, byResume.id, 'resume');
    expect(resumed.status, JSON.stringify(resumed.body)).toBe(200);
    expect(resumed.body).toMatchObject({ status: 'Cancelled', nextBillingAt: null });
    expect(await outbox('subscription.cancelled', 'id', byResume.id)).toHaveLength(1);
    expect(await outbox('subscription.resumed', 'id', byResume.id)).toHaveLength(0);
    // A run after the others' period end (day 31) ends the first; the second's resumeAt, past it, ends it too.
    expect(await run(day(45))).toMatchObject({ charged: 0, terminated: 2 });
    for (const s of [byRun, byResumeAt]) expect(await m.sub(s.id)).toMatchObject({ status: 'Cancelled', cancelledAt: day(45), nextBillingAt: null });
    expect(await run(day(90))).toMatchObject({ charged: 0, terminated: 0 });
    expect((await ledger(m.id)).charges).toHaveLength(3);
    // A new subscription to the plan is no longer refused.
    const again = await api.post('/api/Subscriptions', { merchantId: m.id, memberId: byRun.memberId, planId: m.planId }, { token: m.key, headers: idempotent() });
    expect(again.status, JSON.stringify(again.body)).toBe(201);
  });

  it('ends at its period end a subscription set to cancel then whose debit failed at settlement: no retry after it', async () => {
    const m = await billingMerchant({ merchant: { bankSettlementWindowDays: 3, billingRetryOffsetsDays: '40' }, plan: { amount: 10 } });
    const sub = await m.subscriber([{ ...BANK, last4: '9002' }]);
    expect(await run(T0)).toMatchObject({ charged: 1, failed: 0 });
    expect((await act(m, sub.id, 'cancel', { atPeriodEnd: true })).body).toMatchObject({ status: 'Active', cancelAtPeriodEnd: true });
    expect(await run(day(3))).toMatchObject({ failed: 1 });
    expect(await m.sub(sub.id)).toMatchObject({ status: 'PastDue', cancelAtPeriodEnd: true, nextBillingAt: day(43) });
    expect(await run(day(30))).toMatchObject({ charged: 0, terminated: 0 });
    // The period ends on day 31: Cancelled then, and the retry due on day 43 is never made.
    expect(await run(day(31))).toMatchObject({ charged: 0, terminated: 1 });
    expect(await m.sub(sub.id)).toMatchObject({ status: 'Cancelled', cancelledAt: day(31), nextBillingAt: null });
    expect(await run(day(43))).toMatchObject({ charged: 0, retried: 0 });
    expect((await ledger(m.id)).charges).toHaveLength(1);
  });

  it('ends at its period end a subscription set to cancel then whose debit is still settling, and lets the member subscribe again', async () => {
    const m = await billingMerchant({ merchant: { bankSettlementWindowDays: 10 }, plan: { amount: 10, interval: 'Week' } });
    const sub = await m.subscriber([BANK]);
    expect(await run(T0)).toMatchObject({ charged: 1, failed: 0 });
    expect((await act(m, sub.id, 'cancel', { atPeriodEnd: true })).status).toBe(200);
    expect(await run(day(7))).toMatchObject({ charged: 0, terminated: 1 });
    expect(await m.sub(sub.id)).toMatchObject({ status: 'Cancelled', cancelledAt: day(7) });
    const again = await api.post('/api/Subscriptions', { merchantId: m.id, memberId: sub.memberId, planId: m.planId, startDate: day(7) }, { token: m.key, headers: idempotent() });
    expect(again.status, JSON.stringify(again.body)).toBe(201);
    await act(m, again.body.id, 'cancel');
    // The debit settles later; the period it paid stands.
    expect(await run(day(10))).toMatchObject({ charged: 0 });
    expect((await m.transactions(sub.id)).map((t) => t.status)).toEqual(['Settled']);
    expect(await m.sub(sub.id)).toMatchObject({ status: 'Cancelled' });
  });

  it('bills periods in the years 0001 to 0099 as any other: one charge a period, its statement line dated as charged', async () => {
    const m = await billingMerchant();
    const sub = await m.subscriber([CARD], { startDate: '0050-03-01' });
    expect(await run('0050-03-01T00:00:00.000Z')).toMatchObject({ charged: 1, succeeded: 1, failed: 0 });
    expect(await m.sub(sub.id)).toMatchObject({ status: 'Active', currentPeriodStart: '0050-03-01T00:00:00.000Z', currentPeriodEnd: '0050-04-01T00:00:00.000Z', nextBillingAt: '0050-04-01T00:00:00.000Z' });
    expect(await run('0050-03-02T00:00:00.000Z')).toMatchObject({ charged: 0, retried: 0 });
    expect((await m.transactions(sub.id)).map((t) => [t.status, t.attempt, t.occurredAt])).toEqual([['Settled', 1, '0050-03-01T00:00:00.000Z']]);
    const gen = await api.post('/api/admin/fee-statements/generate', { merchantId: m.id, periodStart: '0050-03-01', periodEnd: '0050-04-01' }, { token: admin });
    expect(gen.status, JSON.stringify(gen.body)).toBe(201);
    const lines = await api.get(`/api/FeeStatements/${gen.body.id}/lines`, { token: m.key });
    expect(lines.body.items.map((l: { occurredAt: string; amount: number }) => [l.occurredAt, l.amount])).toEqual([['0050-03-01T00:00:00.000Z', 19.95]]);
    expect((await ledger(m.id)).charges).toHaveLength(1);
  });

  it('bills nothing past the year 9999: the last period that ends by then is charged, retries fall on its last instant, runs never fail', async () => {
    const LAST = '9999-12-31T23:59:59.999Z';
    const m = await billingMerchant();
    const paying = await m.subscriber([CARD], { startDate: '9999-11-15T00:00:00.000Z' });
    const declined = await m.subscriber([{ ...CARD, last4: '0002' }], { startDate: '9999-11-25T00:00:00.000Z' });
    expect(await run('9999-12-31T00:00:00.000Z')).toMatchObject({ charged: 2, succeeded: 1, failed: 1 });
    expect(await m.sub(paying.id)).toMatchObject({ status: 'Active', currentPeriodStart: '9999-11-15T00:00:00.000Z', nextBillingAt: '9999-12-15T00:00:00.000Z' });
    // Its next period would end in the year 10000: it is not charged (it used to be a 500, every run after it too).
    expect(await run('9999-12-31T00:00:00.000Z')).toMatchObject({ charged: 0 });
    expect(await run(LAST)).toMatchObject({ charged: 1, failed: 1 });
    expect((await m.transactions(paying.id)).map((t) => t.status)).toEqual(['Settled']);
    // The declined one's retries (1, 3, 7 days on) fall on the last instant: the run above made the
    // first, each run there makes the next, and after the third it is cancelled.
    expect((await m.sub(declined.id)).nextBillingAt).toBe(LAST);
    expect(await run(LAST)).toMatchObject({ charged: 1, failed: 1, terminated: 0 });
    expect((await m.sub(declined.id)).nextBillingAt).toBe(LAST);
    expect(await run(LAST)).toMatchObject({ charged: 1, failed: 1, terminated: 1 });
    expect(await m.sub(declined.id)).toMatchObject({ status: 'Cancelled' });
    expect((await m.transactions(declined.id)).map((t) => t.status)).toEqual(['Failed', 'Failed', 'Failed', 'Failed']);
    // A resumeAt whose new period would end after the year 9999 is refused rather than never resuming.
    const pause = await act(m, paying.id, 'pause', { resumeAt: '9999-12-31T23:59:59Z' });
    expect(pause.status).toBe(400);
    expect(pause.body.errors).toHaveProperty('resumeAt');
    // Billing goes on for everyone.
    const other = await m.subscriber();
    expect(await run(T0)).toMatchObject({ charged: 1, succeeded: 1 });
    expect((await m.transactions(other.id)).map((t) => t.status)).toEqual(['Settled']);
  });

  it('resumes a paused subscription at its resumeAt: within its paid period without a charge, after it with a new period charged', async () => {
    const m = await billingMerchant();
    const within = await m.subscriber();
    const after = await m.subscriber();
    expect(await run(T0)).toMatchObject({ charged: 2, succeeded: 2 });
    const pause = (id: string, resumeAt: string) => api.post(`/api/Subscriptions/${id}/pause`, { resumeAt }, { token: m.key, headers: idempotent() });
    // pause checks resumeAt against the real clock: both dates are after it (T0 is in 2030).
    expect((await pause(within.id, day(10))).body).toMatchObject({ status: 'Paused', resumeAt: day(10) });
    expect((await pause(after.id, day(40))).body).toMatchObject({ status: 'Paused', resumeAt: day(40) });

    expect(await run(day(9))).toMatchObject({ charged: 0 });
    expect((await m.sub(within.id)).status).toBe('Paused');
    expect(await run(day(10))).toMatchObject({ charged: 0 });
    expect(await m.sub(within.id)).toMatchObject({ status: 'Active', pausedAt: null, currentPeriodStart: T0, nextBillingAt: '2030-02-15T00:00:00.000Z' });
    expect(await outbox('subscription.resumed', 'id', within.id)).toHaveLength(1);
    expect((await m.sub(after.id)).status).toBe('Paused');

    // Also due by day 41: the renewal of the one resumed within its period (February 15).
    expect(await run(day(41))).toMatchObject({ charged: 2, succeeded: 2 });
    expect(await m.sub(after.id)).toMatchObject({ status: 'Active', currentPeriodStart: day(40), nextBillingAt: '2030-03-24T00:00:00.000Z' });
    expect((await m.transactions(after.id)).map((t) => t.occurredAt).sort()).toEqual([T0, day(41)]);
    expect(sumMinor((await ledger(m.id)).charges)).toBe(4 * 1995);
  });

  it('skips merchants without gateway credentials, ends cancel-at-period-end subscriptions, leaves paused ones', async () => {
    const unconfigured = await billingMerchant({ configured: false });
    const m = await billingMerchant();
    await unconfigured.subscriber();
    const ending = await m.subscriber();
    const paused = await m.subscriber();
    expect(await run(T0)).toMatchObject({ charged: 2, succeeded: 2, skipped: 1 });
    const cancel = await api.post(`/api/Subscriptions/${ending.id}/cancel`, { atPeriodEnd: true }, { token: m.key, headers: idempotent() });
    expect(cancel.body).toMatchObject({ status: 'Active', cancelAtPeriodEnd: true });
    expect((await api.post(`/api/Subscriptions/${paused.id}/pause`, {}, { token: m.key, headers: idempotent() })).status).toBe(200);
    expect(await run('2030-02-15T00:00:00.000Z')).toMatchObject({ charged: 0, terminated: 1, skipped: 1 });
    expect(await m.sub(ending.id)).toMatchObject({ status: 'Cancelled' });
    expect((await m.sub(paused.id)).status).toBe('Paused');
    expect((await ledger(unconfigured.id)).charges).toEqual([]);
    expect((await ledger(m.id)).charges).toHaveLength(2);
  });
});

describe('never twice, never lost', () => {
  it('leaves charges due while the provider is down, and charges them once when it is back', async () => {
    const m = await billingMerchant();
    const subs = [await m.subscriber(), await m.subscriber(), await m.subscriber()];
    await fault(m.id, { down: true });
    // An outage counts on /metrics as charges without an answer (it counted nothing: a dashboard saw "no charges due").
    const unanswered = async () => Number(/^billing_charges_total\{[^}]*outcome="unanswered"[^}]*\} (\d+)/m.exec(await (await fetch(`${platform.processes.billing!.metricsUrl}/metrics`)).text())?.[1] ?? 0);
    const before = await unanswered();
    expect(await run(T0)).toMatchObject({ charged: 3, succeeded: 0, failed: 0 });
    expect(await unanswered()).toBe(before + 3);
    expect((await ledger(m.id)).charges).toEqual([]);
    for (const s of subs) expect(await m.sub(s.id)).toMatchObject({ status: 'Active', nextBillingAt: T0 });
    await fault(m.id, null);
    expect(await run(T0)).toMatchObject({ succeeded: 3 });
    expect(await run(T0)).toMatchObject({ charged: 0 });
    const l = await ledger(m.id);
    expect(l.charges).toHaveLength(3);
    expect(sumMinor(l.charges)).toBe(3 * 1995);
    for (const s of subs) expect((await m.transactions(s.id)).map((t) => t.status)).toEqual(['Settled']);
  });

  it('goes on charging when an unconfirmed charge cannot be recorded, and records it once it can', async () => {
    const stuck = await billingMerchant();
    const other = await billingMerchant();
    const stuckSub = await stuck.subscriber();
    await fault(stuck.id, { down: true });
    expect(await run(T0)).toMatchObject({ charged: 1, succeeded: 0 });
    const [unconfirmed] = await stuck.transactions(stuckSub.id);
    expect(unconfirmed).toMatchObject({ status: 'Processing' });
    await fault(stuck.id, null);
    const otherSub = await other.subscriber();
    // Recording the repeated call's answer fails (as a row the database refuses would); claiming it does not.
    await db.query(`create or replace function billing.refuse_recording() returns trigger language plpgsql as $$
      begin raise exception 'refused by test'; end $$`);
    await db.query(`create trigger refuse_recording before update on billing.transactions for each row
      when (new.id = '${unconfirmed.id}'::uuid and new.status <> 'Processing') execute function billing.refuse_recording()`);
    try {
      // The run neither fails nor stops at reconciliation: the other merchant is charged.
      expect(await run(T0)).toMatchObject({ charged: 1, succeeded: 1 });
      expect((await other.transactions(otherSub.id)).map((t) => t.status)).toEqual(['Settled']);
      expect(await stuck.transactions(stuckSub.id)).toEqual([expect.objectContaining({ id: unconfirmed.id, status: 'Processing' })]);
    } finally {
      await db.query('drop trigger if exists refuse_recording on billing.transactions');
    }
    // Once its claim lapses, a later run records the provider's answer to the same key: one charge.
    const later = await eventually(async () => {
      const r = await run(T0);
      return r.succeeded > 0 ? r : undefined;
    }, 10_000, 200);
    expect(later).toMatchObject({ charged: 0, succeeded: 1 });
    expect((await stuck.transactions(stuckSub.id)).map((t) => [t.id, t.status])).toEqual([[unconfirmed.id, 'Settled']]);
    expect(await stuck.sub(stuckSub.id)).toMatchObject({ status: 'Active', nextBillingAt: day(31) });
    expect((await ledger(stuck.id)).charges).toHaveLength(1);
  });

  it('fails an unconfirmed charge whose repeat the provider refuses for good, and falls back without charging twice', async () => {
    const m = await billingMerchant();
    const sub = await m.subscriber([{ ...CARD, last4: '1111' }, CARD]);
    await fault(m.id, { down: true });
    expect(await run(T0)).toMatchObject({ charged: 1, succeeded: 0 });
    const [unconfirmed] = await m.transactions(sub.id);
    expect(unconfirmed).toMatchObject({ status: 'Processing' });
    await fault(m.id, null);
    // The provider never saw the call; by the time it is repeated with its key, the token is one it does not know.
    await db.query(`update billing.payment_methods set provider_token = 'ctok_unknown_' || id where merchant_id = $1 and last4 = '1111'`, [m.id]);

    expect(await run(T0)).toMatchObject({ succeeded: 1 });
    expect((await m.transactions(sub.id)).map((t) => [t.id === unconfirmed.id, t.status, t.failureReason])).toEqual([
      [true, 'Failed', 'provider_rejected'],
      [false, 'Settled', null],
    ]);
    expect(await run(T0)).toMatchObject({ charged: 0 });
    expect((await ledger(m.id)).charges.map((c) => [c.paymentMethod.last4, c.amountMinor])).toEqual([['4242', 1995]]);
  });

  it('charges each due period exactly once when two runs race', async () => {
    const m = await billingMerchant();
    const subs = await Promise.all(Array.from({ length: 24 }, () => m.subscriber()));
    const [a, b] = await Promise.all([run(T0), run(T0)]);
    expect(a.succeeded + b.succeeded).toBe(24);
    const l = await ledger(m.id);
    expect(l.charges).toHaveLength(24);
    expect(new Set(l.charges.map((c) => c.idempotencyKey)).size).toBe(24);
    expect(sumMinor(l.charges)).toBe(24 * 1995);
    const settled = (await db.query(`select count(*)::int as n from billing.transactions where merchant_id = $1 and status = 'Settled'`, [m.id])).rows[0].n;
    expect(settled).toBe(subs.length);
  });

  let restartBilling: Promise<void> | null = null;
  // Whatever happens in the test, later tests need billing back.
  afterAll(async () => {
    await restartBilling;
    if (!platform.processes.billing!.running()) await platform.processes.billing!.start();
  });

  it('reconciles charges of a billing process killed mid-run from the provider, without charging again', async () => {
    const m = await billingMerchant();
    const subs = await Promise.all(Array.from({ length: 10 }, () => m.subscriber()));
    await fault(m.id, { latencyMs: 1500 });
    const running = api.post('/api/admin/billing-runs', { asOf: T0 }, { token: admin }).catch(() => null);
    // Processing charges are committed before the provider is called: kill billing while calls are in flight.
    const inFlight = await eventually(async () => (await db.query(`select count(*)::int as n from billing.transactions where merchant_id = $1 and provider_ref is null`, [m.id])).rows[0].n as number, 20_000, 20);
    expect(inFlight).toBeGreaterThan(0);
    // Let the calls reach the provider (it holds each 1.5 s before acting on it), then kill.
    await new Promise((r) => setTimeout(r, 400));
    expect(platform.processes.billing!.kill('SIGKILL')).toBe(true);
    await platform.processes.billing!.stop(); // waits for the exit
    await running;
    restartBilling = platform.processes.billing!.start();
    // The provider completes the calls it received although nobody hears the answers.
    const charged = await eventually(async () => (await ledger(m.id)).charges.length, 10_000, 100);
    expect(charged).toBeGreaterThan(0);
    await new Promise((r) => setTimeout(r, 1600));
    await fault(m.id, null);
    await restartBilling;
    restartBilling = null;
    expect(await run(T0)).toMatchObject({ succeeded: 10 });
    const l = await ledger(m.id);
    expect(l.charges).toHaveLength(10);
    expect(charged).toBeLessThanOrEqual(10);
    expect(sumMinor(l.charges)).toBe(10 * 1995);
    for (const s of subs) expect((await m.transactions(s.id)).map((t) => t.status)).toEqual(['Settled']);
  }, 60_000);

  it('loses nothing when the provider restarts: a bank debit in its settlement window still settles, a card on file still charges, each period once', async () => {
    const m = await billingMerchant({ merchant: { bankSettlementWindowDays: 3 } });
    const bank = await m.subscriber([BANK]);
    const card = await m.subscriber([CARD]);
    expect(await run(T0)).toMatchObject({ charged: 2, succeeded: 2 });
    const provider = platform.processes['sandbox-provider']!;
    expect(provider.kill('SIGKILL')).toBe(true);
    await provider.stop(); // waits for the exit
    await provider.start();
    await run(day(3));
    expect((await m.transactions(bank.id)).map((t) => t.status)).toEqual(['Settled']);
    await run('2030-02-15T00:00:00.000Z');
    expect((await m.transactions(card.id)).map((t) => [t.status, t.failureReason])).toEqual([
      ['Settled', null],
      ['Settled', null],
    ]);
    // The provider's own ledger: both first periods settled, the card's second, the bank's second in its window.
    expect((await ledger(m.id)).charges.map((c) => c.status).sort()).toEqual(['Processing', 'Settled', 'Settled', 'Settled']);
  }, 60_000);

  /** Runs at `asOf` until one has recorded the provider's answer to the subscription's unconfirmed charge (once its claim has lapsed). */
  async function runUntilAnswered(m: { transactions: (id: string) => Promise<any[]> }, subscriptionId: string, asOf: string): Promise<any[]> {
    const charges = await eventually(async () => {
      await run(asOf);
      const listed = await m.transactions(subscriptionId);
      return listed.every((t) => t.status !== 'Processing') ? listed : undefined;
    }, 15_000, 200);
    expect(charges, 'a run recorded the answer').toBeDefined();
    return charges!;
  }

  it('refuses to resume a subscription paused while its charge had no answer (billing killed mid-call) until a run records it, then keeps the period it paid: charged once', async () => {
    const m = await billingMerchant();
    // Billed in real time: a resume now is after the charged period's start.
    const sub = await m.subscriber([CARD], { startDate: new Date().toISOString() });
    const asOf = new Date(Date.now() + 60_000).toISOString();
    await fault(m.id, { latencyMs: 1500 });
    const running = api.post('/api/admin/billing-runs', { asOf }, { token: admin }).catch(() => null);
    await eventually(async () => (await db.query(`select count(*)::int as n from billing.transactions where subscription_id = $1 and provider_ref is null`, [sub.id])).rows[0].n === 1, 20_000, 20);
    await new Promise((r) => setTimeout(r, 400));
    expect(platform.processes.billing!.kill('SIGKILL')).toBe(true);
    await platform.processes.billing!.stop();
    await running;
    restartBilling = platform.processes.billing!.start();
    // The provider charges the card although nobody hears its answer.
    expect(await eventually(async () => (await ledger(m.id)).charges.length, 10_000, 100)).toBe(1);
    await fault(m.id, null);
    await restartBilling;
    restartBilling = null;

    expect(await act(m, sub.id, 'pause')).toMatchObject({ status: 200, body: { status: 'Paused' } });
    // Resumed now it would start a new period due at once, and the next run would charge it
    // beside the one the unanswered charge paid for.
    const early = await act(m, sub.id, 'resume');
    expect(early.status, JSON.stringify(early.body)).toBe(409);
    expect(early.body.detail).toMatch(/unknown outcome/);
    expect(Number(early.headers.get('retry-after'))).toBeGreaterThan(0);
    expect(await m.sub(sub.id)).toMatchObject({ status: 'Paused' });

    const [charge] = await runUntilAnswered(m, sub.id, asOf);
    expect(charge).toMatchObject({ status: 'Settled' });
    const paused = await m.sub(sub.id);
    expect(paused).toMatchObject({ status: 'Paused', nextBillingAt: paused.currentPeriodEnd });
    const resumed = await act(m, sub.id, 'resume');
    expect(resumed.status, JSON.stringify(resumed.body)).toBe(200);
    expect(resumed.body).toMatchObject({ status: 'Active', currentPeriodStart: paused.currentPeriodStart, nextBillingAt: paused.currentPeriodEnd });
    expect(await run(asOf)).toMatchObject({ charged: 0 });
    expect((await ledger(m.id)).charges).toHaveLength(1);
    expect((await m.transactions(sub.id)).map((t) => t.status)).toEqual(['Settled']);
  }, 60_000);

  it("resumes at its resumeAt a subscription paused while its charge had no answer (the provider timed out) only once a run has recorded it: the period it paid runs on, charged once", async () => {
    const m = await billingMerchant();
    const sub = await m.subscriber([CARD], { startDate: new Date().toISOString() });
    // The provider acts on the call after 2.5 s; billing gives up after 1 s (PAYMENT_PROVIDER_TIMEOUT_MS).
    await fault(m.id, { latencyMs: 2500 });
    expect(await run(new Date(Date.now() + 60_000).toISOString())).toMatchObject({ charged: 1 });
    expect((await m.transactions(sub.id)).map((t) => t.status)).toEqual(['Processing']);
    const resumeAt = new Date(Date.now() + 120_000).toISOString();
    expect(await act(m, sub.id, 'pause', { resumeAt })).toMatchObject({ status: 200, body: { status: 'Paused', resumeAt } });
    expect(await eventually(async () => (await ledger(m.id)).charges.length, 10_000, 100)).toBe(1);
    await fault(m.id, null);

    // Every run is past the resumeAt; the first ones come before the charge's claim has lapsed.
    const asOf = new Date(Date.now() + 300_000).toISOString();
    expect(await run(asOf)).toMatchObject({ charged: 0 });
    await runUntilAnswered(m, sub.id, asOf);
    await run(asOf);
    const resumed = await m.sub(sub.id);
    expect(resumed).toMatchObject({ status: 'Active', pausedAt: null, resumeAt: null });
    expect(resumed.nextBillingAt).toBe(resumed.currentPeriodEnd);
    expect(new Date(resumed.currentPeriodStart).getTime()).toBeLessThan(new Date(resumeAt).getTime());
    expect((await ledger(m.id)).charges).toHaveLength(1);
    expect((await m.transactions(sub.id)).map((t) => t.status)).toEqual(['Settled']);
  }, 60_000);
});

describe('retry and refund', () => {
  it('refunds partially and by default the rest; never more than the charge, even concurrently', async () => {
    const { m, sub, charge, refund } = await settledCharge();

    expect((await api.post(`/api/Transactions/${charge.id}/refund`, {}, { token: m.key })).status).toBe(400);
    expect((await refund({ amount: 0 })).status).toBe(400);
    expect((await refund({ amount: -5 })).status).toBe(400);
    const first = await refund({ amount: 10.5, reason: 'goodwill' });
    expect(first.status).toBe(201);
    expect(first.headers.get('location')).toBe(`/api/Transactions/${first.body.id}`);
    expect(first.body).toMatchObject({ kind: 'Refund', amount: 10.5, status: 'Settled', originalTransactionId: charge.id, subscriptionId: sub.id });
    expect((await refund({ amount: 89.51 })).status).toBe(409);

    // 89.50 left: of four concurrent refunds of 30, exactly two fit.
    const racing = await Promise.all([1, 2, 3, 4].map(() => refund({ amount: 30 })));
    expect(racing.map((r) => r.status).sort()).toEqual([201, 201, 409, 409]);
    const rest = await refund({});
    expect(rest.body).toMatchObject({ status: 'Settled', amount: 29.5 });
    expect((await refund({})).status).toBe(409);

    const l = await ledger(m.id);
    expect(sumMinor(l.refunds)).toBe(10000);
    expect(l.refunds).toHaveLength(4);
    expect(await outbox('transaction.refunded', 'originalTransactionId', charge.id)).toHaveLength(4);
  });

  it('retries a failed charge with attempt + 1, and refuses what cannot be retried or refunded', async () => {
    const m = await billingMerchant();
    const sub = await m.subscriber([{ ...CARD, last4: '0002' }]);
    await run(T0);
    const [failed] = await m.transactions(sub.id);
    expect(failed.status).toBe('Failed');
    expect((await api.post(`/api/Transactions/${failed.id}/refund`, {}, { token: m.key, headers: idempotent() })).status).toBe(409);
    const key = randomUUID();
    const retry = await api.post(`/api/Transactions/${failed.id}/retry`, {}, { token: m.key, headers: idempotent(key) });
    expect(retry.status).toBe(201);
    expect(retry.body).toMatchObject({ kind: 'Charge', attempt: 2, status: 'Failed', originalTransactionId: failed.id, paymentMethodId: failed.paymentMethodId });
    const replay = await api.post(`/api/Transactions/${failed.id}/retry`, {}, { token: m.key, headers: idempotent(key) });
    expect([replay.status, replay.body.id, replay.headers.get('idempotent-replayed')]).toEqual([201, retry.body.id, 'true']);
    expect((await api.post(`/api/Transactions/${failed.id}/retry`, {}, { token: m.key, headers: idempotent() })).status).toBe(409);
    // The provider was asked to charge the retry, by its id, on the failed charge's method.
    const charged = (await ledger(m.id)).charges;
    expect(charged).toHaveLength(2);
    const first = charged.find((c) => c.idempotencyKey === failed.id)!;
    expect(charged.find((c) => c.idempotencyKey === retry.body.id)).toMatchObject({ amountMinor: first.amountMinor, status: first.status, paymentMethod: { last4: '0002' } });

    const ok = await m.subscriber();
    await run(T0);
    const [settled] = await m.transactions(ok.id);
    expect((await api.post(`/api/Transactions/${settled.id}/retry`, {}, { token: m.key, headers: idempotent() })).status).toBe(409);
    expect((await api.post(`/api/Transactions/${randomUUID()}/retry`, {}, { token: m.key, headers: idempotent() })).status).toBe(404);
    // An id of the uuid shape without RFC 9562's version digit names nothing: 404, not 400.
    expect((await api.get('/api/Transactions/00000000-0000-0000-0000-000000000001', { token: m.key })).status).toBe(404);
    expect((await api.post('/api/admin/fee-statements/00000000-0000-0000-0000-000000000001/pay', {}, { token: admin })).status).toBe(404);
    expect((await api.get(`/api/Transactions/${randomUUID()}`, { token: m.key })).status).toBe(404);

    await fault(m.id, { down: true });
    expect((await api.post(`/api/Transactions/${settled.id}/refund`, { amount: 1 }, { token: m.key, headers: idempotent() })).status).toBe(502);
    await fault(m.id, null);
  });

  it('retries a declined charge on the method ranked first now: a card added and made the default, or the declined one removed', async () => {
    const m = await billingMerchant();
    const DECLINED = { ...CARD, last4: '0002' };
    const promoted = await m.subscriber([DECLINED]);
    const removed = await m.subscriber([DECLINED]);
    await run(T0);
    const [failed] = await m.transactions(promoted.id);
    const [failedToo] = await m.transactions(removed.id);
    expect([failed.status, failedToo.status]).toEqual(['Failed', 'Failed']);
    expect((await m.sub(promoted.id)).status).toBe('PastDue');

    // The customer adds a new card and makes it the default; then staff retry.
    const card = await addPaymentMethod(api, m, promoted.memberId);
    const reorder = await api.post(`/api/members/${promoted.memberId}/payment-methods/reorder`, { orderedIds: [card.id, failed.paymentMethodId] }, { token: m.key });
    expect(reorder.status).toBe(200);
    const retry = await api.post(`/api/Transactions/${failed.id}/retry`, {}, { token: m.key, headers: idempotent() });
    expect(retry.status).toBe(201);
    expect(retry.body).toMatchObject({ kind: 'Charge', status: 'Settled', attempt: 2, paymentMethodId: card.id, originalTransactionId: failed.id });
    expect(await m.sub(promoted.id)).toMatchObject({ status: 'Active', currentPeriodStart: T0 });

    // The other adds a card and the declined one is removed (the charge keeps no method).
    const other = await addPaymentMethod(api, m, removed.memberId);
    await db.query(`delete from billing.payment_methods where id = $1`, [failedToo.paymentMethodId]);
    const second = await api.post(`/api/Transactions/${failedToo.id}/retry`, {}, { token: m.key, headers: idempotent() });
    expect(second.status).toBe(201);
    expect(second.body).toMatchObject({ status: 'Settled', attempt: 2, paymentMethodId: other.id, originalTransactionId: failedToo.id });
    expect((await m.sub(removed.id)).status).toBe('Active');

    const l = await ledger(m.id);
    expect(l.charges.map((c) => [c.idempotencyKey, c.paymentMethod.last4, c.status]).sort()).toEqual(
      [[failed.id, '0002', 'Failed'], [failedToo.id, '0002', 'Failed'], [retry.body.id, '4242', 'Settled'], [second.body.id, '4242', 'Settled']].sort(),
    );
  });

  it('retries against the methods in rank order until one succeeds, each try a retry of the one before', async () => {
    const m = await billingMerchant();
    const DECLINED = { ...CARD, last4: '0002' };
    // Both methods declined in the run; a good card is added ranked first, or ranked last.
    const first = await m.subscriber([DECLINED, DECLINED]);
    const last = await m.subscriber([DECLINED, DECLINED]);
    expect(await run(T0)).toMatchObject({ charged: 2, failed: 2 });
    const failedFirst = byAttempt(await m.transactions(first.id)).at(-1);
    const failedLast = byAttempt(await m.transactions(last.id)).at(-1);

    const good = await addPaymentMethod(api, m, first.memberId);
    const methods = (await api.get(`/api/members/${first.memberId}/payment-methods`, { token: m.key })).body as { id: string }[];
    const ranked = [good.id, ...methods.map((pm) => pm.id).filter((id) => id !== good.id)];
    expect((await api.post(`/api/members/${first.memberId}/payment-methods/reorder`, { orderedIds: ranked }, { token: m.key })).status).toBe(200);
    const retry = await api.post(`/api/Transactions/${failedFirst.id}/retry`, {}, { token: m.key, headers: idempotent() });
    expect(retry.body).toMatchObject({ status: 'Settled', attempt: 2, paymentMethodId: good.id, originalTransactionId: failedFirst.id });
    expect(byAttempt(await m.transactions(first.id)).map((t) => [t.attempt, t.status])).toEqual([[1, 'Failed'], [1, 'Failed'], [2, 'Settled']]);

    // Ranked last, after the two declined ones and a third added later: the methods that have not
    // failed the period are tried first, in rank order, each try its own Charge of the next
    // attempt; the two that declined in the run are not tried again.
    const another = await addPaymentMethod(api, m, last.memberId, DECLINED);
    const fallback = await addPaymentMethod(api, m, last.memberId);
    const retried = await api.post(`/api/Transactions/${failedLast.id}/retry`, {}, { token: m.key, headers: idempotent() });
    expect(retried.status).toBe(201);
    expect(retried.body).toMatchObject({ status: 'Settled', attempt: 3, paymentMethodId: fallback.id });
    const txns = byAttempt(await m.transactions(last.id));
    expect(txns.map((t) => [t.attempt, t.status])).toEqual([[1, 'Failed'], [1, 'Failed'], [2, 'Failed'], [3, 'Settled']]);
    expect(txns.slice(2).map((t) => t.originalTransactionId)).toEqual([failedLast.id, txns[2].id]);
    expect(txns[2].paymentMethodId).toBe(another.id);
    expect(await m.sub(last.id)).toMatchObject({ status: 'Active', currentPeriodStart: T0 });
    expect(await outbox('transaction.failed', 'id', txns[2].id)).toHaveLength(1);
    expect((await ledger(m.id)).charges.filter((c) => c.status === 'Settled')).toHaveLength(2);
  });

  it('records a due charge of a member with no payment method as Failed (no_payment_method), sending nothing; it can be retried once a method is added', async () => {
    const m = await billingMerchant();
    const sub = await m.subscriber([]);
    expect(await run(T0)).toMatchObject({ charged: 1, succeeded: 0, failed: 1 });
    expect((await m.sub(sub.id)).status).toBe('PastDue');
    const [failed, ...more] = await m.transactions(sub.id);
    expect(more).toEqual([]);
    expect(failed).toMatchObject({ kind: 'Charge', status: 'Failed', failureReason: 'no_payment_method', paymentMethodId: null, attempt: 1, amount: 19.95, occurredAt: T0 });
    expect(await outbox('transaction.failed', 'id', failed.id)).toHaveLength(1);
    expect((await ledger(m.id)).charges).toEqual([]);
    await addPaymentMethod(api, m, sub.memberId, CARD);
    const retry = await api.post(`/api/Transactions/${failed.id}/retry`, {}, { token: m.key, headers: idempotent() });
    expect(retry.status).toBe(201);
    expect(retry.body).toMatchObject({ status: 'Settled', attempt: 2, originalTransactionId: failed.id });
    expect((await m.sub(sub.id)).status).toBe('Active');
    expect((await ledger(m.id)).charges).toHaveLength(1);
  });

  it('answers the last declined try when every method declines the retry, and 409 charging nothing when the member has no method', async () => {
    const m = await billingMerchant();
    const DECLINED = { ...CARD, last4: '0002' };
    const sub = await m.subscriber([DECLINED, DECLINED]);
    await run(T0);
    const failed = byAttempt(await m.transactions(sub.id)).at(-1);
    const retry = await api.post(`/api/Transactions/${failed.id}/retry`, {}, { token: m.key, headers: idempotent() });
    expect(retry.status).toBe(201);
    const txns = byAttempt(await m.transactions(sub.id));
    expect(txns.map((t) => [t.attempt, t.status])).toEqual([[1, 'Failed'], [1, 'Failed'], [2, 'Failed'], [3, 'Failed']]);
    expect(retry.body).toEqual(txns[3]);
    expect(retry.body).toMatchObject({ failureReason: 'card_declined', originalTransactionId: txns[2].id });
    expect((await m.sub(sub.id)).status).toBe('PastDue');
    // Only the latest try is retried again.
    expect((await api.post(`/api/Transactions/${txns[2].id}/retry`, {}, { token: m.key, headers: idempotent() })).status).toBe(409);

    await db.query(`delete from billing.payment_methods where member_id = $1`, [sub.memberId]);
    const none = await api.post(`/api/Transactions/${retry.body.id}/retry`, {}, { token: m.key, headers: idempotent() });
    expect(none.status).toBe(409);
    expect(none.body.detail).toMatch(/no payment method/);
    expect(await m.transactions(sub.id)).toHaveLength(4);
    expect((await ledger(m.id)).charges).toHaveLength(4);
  });

  it('numbers a billing run retry after the manual retries of its period, without counting them on the retry ladder', async () => {
    const m = await billingMerchant({ merchant: { billingRetryOffsetsDays: '1,3' } });
    const sub = await m.subscriber([{ ...CARD, last4: '0002' }]);
    await run(T0);
    const attempts = async () => byAttempt(await m.transactions(sub.id)).map((t) => t.attempt);
    const retryLatest = async () => {
      const latest = byAttempt(await m.transactions(sub.id)).at(-1);
      const res = await api.post(`/api/Transactions/${latest.id}/retry`, {}, { token: m.key, headers: idempotent() });
      expect(res.body).toMatchObject({ status: 'Failed', attempt: latest.attempt + 1 });
    };
    await retryLatest();
    expect(await attempts()).toEqual([1, 2]);
    expect(await run(day(1))).toMatchObject({ charged: 1, retried: 1, failed: 1 });
    expect(await attempts()).toEqual([1, 2, 3]);
    // The manual retry took no place on the ladder: the run's retry was the first of two.
    expect(await m.sub(sub.id)).toMatchObject({ status: 'PastDue', nextBillingAt: day(3) });
    await retryLatest();
    expect(await run(day(3))).toMatchObject({ charged: 1, retried: 1, failed: 1, terminated: 1 });
    expect(await attempts()).toEqual([1, 2, 3, 4, 5]);
    expect((await m.sub(sub.id)).status).toBe('Cancelled');
  });

  it('fails a refund the provider refuses for good with 409, releases its amount, and refunds nothing', async () => {
    const { m, sub, charge, refund, refunds } = await settledCharge();
    const { rows } = await db.query(`select provider_ref from billing.transactions where id = $1`, [charge.id]);
    // A charge reference the provider does not know: it answers 404 charge_not_found.
    await db.query(`update billing.transactions set provider_ref = 'ch_unknown' where id = $1`, [charge.id]);

    const refused = await refund({ amount: 40 });
    expect(refused.status).toBe(409);
    const [failed] = await refunds();
    expect(failed).toMatchObject({ kind: 'Refund', status: 'Failed', failureReason: 'provider_rejected', amount: 40, originalTransactionId: charge.id });
    expect(refused.body).toMatchObject({ transactionId: failed.id, failureReason: 'provider_rejected' });
    expect(refused.body.detail).toContain(failed.id);
    expect(await outbox('transaction.failed', 'id', failed.id)).toHaveLength(1);
    await run(T0);
    expect(await refunds()).toMatchObject([{ id: failed.id, status: 'Failed' }]);

    await db.query(`update billing.transactions set provider_ref = $2 where id = $1`, [charge.id, rows[0].provider_ref]);
    const rest = await refund({});
    expect(rest.body).toMatchObject({ status: 'Settled', amount: 100 });
    const l = await ledger(m.id);
    expect(l.refunds.map((r) => [r.idempotencyKey, r.amountMinor])).toEqual([[rest.body.id, 10000]]);
  });

  it('keeps a refund whose provider call timed out Processing and reserved, and settles it once at the next run', async () => {
    const { m, sub, charge, refund, refunds } = await settledCharge();

    // The provider acts on the call after 2.5 s; billing gives up after 1 s (PAYMENT_PROVIDER_TIMEOUT_MS).
    await fault(m.id, { latencyMs: 2500 });
    const key = randomUUID();
    const timedOut = await refund({ amount: 10 }, key);
    await fault(m.id, null);
    expect(timedOut.status).toBe(502);
    const [pending] = await refunds();
    expect(pending).toMatchObject({ status: 'Processing', amount: 10, originalTransactionId: charge.id });
    expect(timedOut.body.detail).toContain(pending.id);
    // Its amount stays reserved; the same key replays the 502 without calling the provider again.
    expect((await refund({ amount: 90.01 })).status).toBe(409);
    expect((await refund({ amount: 10 }, key)).status).toBe(502);
    // The provider completes the call nobody heard the answer of.
    expect(await eventually(async () => (await ledger(m.id)).refunds.length, 10_000, 100)).toBe(1);
    expect(await refunds()).toMatchObject([{ id: pending.id, status: 'Processing' }]);

    await run(T0);
    expect(await refunds()).toMatchObject([{ id: pending.id, status: 'Settled', amount: 10 }]);
    expect(await outbox('transaction.refunded', 'originalTransactionId', charge.id)).toHaveLength(1);
    const rest = await refund({});
    expect(rest.body).toMatchObject({ status: 'Settled', amount: 90 });
    const l = await ledger(m.id);
    expect(l.refunds.map((r) => [r.idempotencyKey, r.amountMinor])).toEqual([[pending.id, 1000], [rest.body.id, 9000]]);
    expect(sumMinor(l.refunds)).toBe(10000);
  });

  it("refuses a refund, retry or charge while the merchant's environment has no payment provider, recording nothing, so trying again refunds once", async () => {
    const m = await billingMerchant({ plan: { amount: 100 } });
    const sub = await m.subscriber();
    const declined = await m.subscriber([{ ...CARD, last4: '0002' }]);
    await run(T0);
    const [charge] = await m.transactions(sub.id);
    const [failed] = await m.transactions(declined.id);
    expect([charge.status, failed.status]).toEqual(['Settled', 'Failed']);
    const environment = async (providerEnvironment: string) =>
      expect((await api.put(`/api/admin/merchants/${m.id}/provider`, { providerEnvironment }, { token: admin })).status).toBe(200);
    const refund = (body: Record<string, unknown>) => api.post(`/api/Transactions/${charge.id}/refund`, body, { token: m.key, headers: idempotent() });

    // No provider is configured for Production: nothing can be sent, so nothing is recorded or reserved.
    await environment('Production');
    const refused = await refund({ amount: 5 });
    expect(refused.status, JSON.stringify(refused.body)).toBe(502);
    const retried = await api.post(`/api/Transactions/${failed.id}/retry`, {}, { token: m.key, headers: idempotent() });
    expect(retried.status, JSON.stringify(retried.body)).toBe(502);
    const due = await m.subscriber();
    expect(await run(T0)).toMatchObject({ charged: 0, skipped: 1 });
    expect((await m.transactions(sub.id)).map((t) => [t.kind, t.status])).toEqual([['Charge', 'Settled']]);
    expect((await m.transactions(declined.id)).map((t) => [t.kind, t.status])).toEqual([['Charge', 'Failed']]);
    expect(await m.transactions(due.id)).toEqual([]);
    expect((await db.query(`select refunded_minor::int as n from billing.transactions where id = $1`, [charge.id])).rows[0].n).toBe(0);
    expect(refused.body.detail).toContain('nothing was refunded and nothing was recorded');
    expect(retried.body.detail).toContain('nothing was charged and nothing was recorded');

    // Back on Staging, past any lease: the refund tried again with a new key is the only one made.
    await environment('Staging');
    await new Promise((r) => setTimeout(r, 1600));
    const rest = await refund({});
    expect(rest.body).toMatchObject({ status: 'Settled', amount: 100 });
    expect(await run(T0)).toMatchObject({ charged: 1, succeeded: 1 });
    const l = await ledger(m.id);
    expect(l.refunds.map((r) => [r.idempotencyKey, r.amountMinor])).toEqual([[rest.body.id, 10000]]);
    expect(l.charges).toHaveLength(3);
    expect((await m.transactions(sub.id)).filter((t) => t.kind === 'Refund').map((t) => [t.amount, t.status])).toEqual([[100, 'Settled']]);
  });

  it('refuses a new refund of a charge while a refund of it has an unknown outcome, naming it; refunds racing while their calls are in flight are each made', async () => {
    const { m, sub, charge, refund, refunds } = await settledCharge();

    // The provider acts on each call after 2.5 s; billing gives up after 1 s. Two refunds racing
    // are both in flight at once: neither is refused for the other, both answer 502.
    await fault(m.id, { latencyMs: 2500 });
    const racing = await Promise.all([refund({ amount: 5 }), refund({ amount: 5 })]);
    await fault(m.id, null);
    expect(racing.map((r) => r.status)).toEqual([502, 502]);
    const pending = await refunds();
    expect(pending.map((t) => [t.amount, t.status])).toEqual([[5, 'Processing'], [5, 'Processing']]);

    // Told 502, the client tries again with a new key: refused, naming a refund of unknown outcome, nothing reserved.
    const again = await refund({ amount: 5 });
    expect(again.status, JSON.stringify(again.body)).toBe(409);
    expect(pending.map((t) => t.id)).toContain(again.body.transactionId);
    expect(again.body.detail).toContain(again.body.transactionId);
    expect((await refunds()).map((t) => t.id).sort()).toEqual(pending.map((t) => t.id).sort());
    // Let the provider act on the calls it received (on a loaded machine one may never have left
    // billing within its 1 s: the run below then makes it, with the same key).
    await eventually(async () => (await ledger(m.id)).refunds.length === 2, 10_000, 100);

    // The next run records both; then a refund is made again, of what is left.
    await run(T0);
    expect((await refunds()).map((t) => t.status)).toEqual(['Settled', 'Settled']);
    const rest = await refund({});
    expect(rest.body).toMatchObject({ status: 'Settled', amount: 90 });
    const l = await ledger(m.id);
    expect(l.refunds.map((r) => r.idempotencyKey).sort()).toEqual([...pending.map((t) => t.id), rest.body.id].sort());
    expect(sumMinor(l.refunds)).toBe(10000);
  });

  it('answers concurrent refunds of many charges each as recorded: no charge over-refunded, an unreachable provider failing only its own', async () => {
    const m = await billingMerchant({ plan: { amount: 100 } });
    const down = await billingMerchant({ plan: { amount: 100 } });
    const subs = await Promise.all(Array.from({ length: 8 }, () => m.subscriber()));
    // Two charges, one refund each: a second refund of one charge would be refused (409) once the first had answered 502.
    const downSubs = [await down.subscriber(), await down.subscriber()];
    await run(T0);
    const charges = await Promise.all(subs.map(async (s) => (await m.transactions(s.id))[0]));
    const downCharges = await Promise.all(downSubs.map(async (s) => (await down.transactions(s.id))[0]));
    await fault(down.id, { down: true });

    const refund = (merchant: { key: string }, chargeId: string, amount: number) =>
      api.post(`/api/Transactions/${chargeId}/refund`, { amount }, { token: merchant.key, headers: idempotent() });
    // Five refunds of 30 race on the first charge (three fit in 100); one of 40 on each other; one on each of the unreachable merchant's.
    const [racing, single, unreachable] = await Promise.all([
      Promise.all([1, 2, 3, 4, 5].map(() => refund(m, charges[0].id, 30))),
      Promise.all(charges.slice(1).map((c) => refund(m, c.id, 40))),
      Promise.all(downCharges.map((c) => refund(down, c.id, 10))),
    ]);
    await fault(down.id, null);

    expect(racing.map((r) => r.status).sort()).toEqual([201, 201, 201, 409, 409]);
    expect(single.map((r) => r.status)).toEqual(single.map(() => 201));
    const created = [...racing, ...single].filter((r) => r.status === 201);
    for (const r of created) {
      expect(r.body).toMatchObject({ kind: 'Refund', status: 'Settled' });
      expect((await api.get(`/api/Transactions/${r.body.id}`, { token: m.key })).body).toEqual(r.body);
      expect(await outbox('transaction.refunded', 'id', r.body.id)).toHaveLength(1);
    }
    const { rows } = await db.query(
      `select c.id, c.amount_minor::int as amount, c.refunded_minor::int as refunded,
              (select coalesce(sum(r.amount_minor), 0)::int from billing.transactions r where r.original_transaction_id = c.id and r.kind = 'Refund' and r.status <> 'Failed') as refunds
         from billing.transactions c where c.id = any($1::uuid[]) order by c.id`,
      [[...charges.map((c) => c.id), ...downCharges.map((c) => c.id)]],
    );
    for (const c of rows) {
      expect(c.refunded).toBe(c.refunds);
      expect(c.refunded).toBeLessThanOrEqual(c.amount);
    }
    expect(rows.find((c) => c.id === charges[0].id)!.refunded).toBe(9000);
    const l = await ledger(m.id);
    expect(sumMinor(l.refunds)).toBe(9000 + 7 * 4000);
    expect(l.refunds.map((r) => r.idempotencyKey).sort()).toEqual(created.map((r) => r.body.id).sort());

    // The unreachable provider's refunds: 502 naming each, Processing with their amounts reserved, no event yet.
    expect(unreachable.map((r) => r.status)).toEqual([502, 502]);
    const pending = (await Promise.all(downSubs.map((s) => down.transactions(s.id)))).flat().filter((t) => t.kind === 'Refund');
    expect(pending.map((t) => t.status)).toEqual(['Processing', 'Processing']);
    expect(unreachable.map((r) => pending.find((t) => r.body.detail.includes(t.id))?.id).sort()).toEqual(pending.map((t) => t.id).sort());
    for (const c of downCharges) expect(rows.find((r) => r.id === c.id)!.refunded).toBe(1000);
    for (const t of pending) expect(await outbox('transaction.refunded', 'id', t.id)).toHaveLength(0);
  });

  it('refuses a retry of a charge whose subscription is Paused or Cancelled with 409, as the API reference says, charging nothing', async () => {
    const m = await billingMerchant();
    const paused = await m.subscriber([{ ...CARD, last4: '0002' }]);
    const cancelled = await m.subscriber([{ ...CARD, last4: '0002' }]);
    await run(T0);
    expect((await act(m, paused.id, 'pause')).status).toBe(200);
    expect((await act(m, cancelled.id, 'cancel')).status).toBe(200);
    for (const [sub, status] of [[paused, 'Paused'], [cancelled, 'Cancelled']] as const) {
      const [failed] = await m.transactions(sub.id);
      const res = await api.post(`/api/Transactions/${failed.id}/retry`, {}, { token: m.key, headers: idempotent() });
      expect([res.status, res.body.detail]).toEqual([409, `The subscription is ${status}; its charges are not retried.`]);
      expect(await m.transactions(sub.id)).toHaveLength(1);
    }
    // The operation's own description lists it among its 409s (it named only the charge's own states).
    const doc = await api.get('/openapi.json');
    expect(doc.body.paths['/api/Transactions/{id}/retry'].post.description).toContain('its subscription Paused or Cancelled');
  });

  it('retries many failed charges at once, each once', async () => {
    const m = await billingMerchant();
    const subs = await Promise.all(Array.from({ length: 5 }, () => m.subscriber([{ ...CARD, last4: '0002' }])));
    await run(T0);
    const failed = await Promise.all(subs.map(async (s) => (await m.transactions(s.id))[0]));
    const retry = (id: string) => api.post(`/api/Transactions/${id}/retry`, {}, { token: m.key, headers: idempotent() });
    // Two retries race on the first charge: one is made, the other refused.
    const answers = await Promise.all([failed[0].id, ...failed.map((t) => t.id)].map(retry));
    expect(answers.map((r) => r.status).sort()).toEqual([201, 201, 201, 201, 201, 409]);
    for (const r of answers.filter((a) => a.status === 201)) {
      expect(r.body).toMatchObject({ kind: 'Charge', attempt: 2, status: 'Failed', failureReason: 'card_declined' });
      expect((await api.get(`/api/Transactions/${r.body.id}`, { token: m.key })).body).toEqual(r.body);
      expect(await outbox('transaction.failed', 'id', r.body.id)).toHaveLength(1);
    }
    for (const s of subs) expect((await m.transactions(s.id)).map((t) => t.attempt).sort()).toEqual([1, 2]);
    expect((await ledger(m.id)).charges).toHaveLength(10);
  });

  it('lets Staff refund and Viewers only read; another merchant sees 404', async () => {
    const m = await billingMerchant();
    const other = await billingMerchant();
    const sub = await m.subscriber();
    await run(T0);
    const [charge] = await m.transactions(sub.id);
    const login = async (role: string) => (await createMerchantUser(api, admin, m.id, role)).token;
    const viewer = await login('Viewer');
    const staff = await login('Staff');
    expect((await api.get(`/api/Transactions/${charge.id}`, { token: viewer })).status).toBe(200);
    expect((await api.post(`/api/Transactions/${charge.id}/refund`, { amount: 1 }, { token: viewer, headers: idempotent() })).status).toBe(403);
    expect((await api.post(`/api/Transactions/${charge.id}/refund`, { amount: 1 }, { token: staff, headers: idempotent() })).status).toBe(201);
    expect((await api.get(`/api/Transactions/${charge.id}`, { token: other.key })).status).toBe(404);
    expect((await api.get(`/api/Transactions?merchantId=${m.id}`, { token: other.key })).status).toBe(403);
    expect((await api.post('/api/admin/billing-runs', { asOf: T0 }, { token: m.key })).status).toBe(401);
    expect((await api.post('/api/admin/billing-runs', { asOf: 'yesterday' }, { token: admin })).status).toBe(400);
    // Year 0000 is no instant storage holds (it was a 500).
    const yearZero = await api.post('/api/admin/billing-runs', { asOf: '0000-01-01T00:00:00Z' }, { token: admin });
    expect(yearZero.status).toBe(400);
    expect(yearZero.body.errors.asOf).toBeDefined();
  });
});

describe('fees and fee statements', () => {
  it('defaults to 1.5 % + 0.30 and lets the platform admin change the terms', async () => {
    const m = await createMerchant(api, admin);
    expect(m).toMatchObject({ platformFeePercent: 1.5, platformFeeFixed: 0.3 });
    const custom = await createMerchant(api, admin, { platformFeePercent: 2.9, platformFeeFixed: 0.25 });
    expect(custom).toMatchObject({ platformFeePercent: 2.9, platformFeeFixed: 0.25 });
    const patched = await api.patch(`/api/admin/merchants/${m.id}`, { platformFeePercent: '0.125', platformFeeFixed: 0 }, { token: admin });
    expect(patched.status).toBe(200);
    expect(patched.body).toMatchObject({ platformFeePercent: 0.125, platformFeeFixed: 0, billingRetryOffsetsDays: '1,3,7' });
    expect((await api.patch(`/api/admin/merchants/${m.id}`, { platformFeePercent: 101 }, { token: admin })).status).toBe(400);
    // A fixed fee over the largest one is refused with a message naming that limit (it said only
    // "at most 2 decimals" of 1000000, which has none); the largest is kept.
    const huge = await api.patch(`/api/admin/merchants/${m.id}`, { platformFeeFixed: 1000000 }, { token: admin });
    expect([huge.status, huge.body.errors]).toEqual([400, { platformFeeFixed: ['Must be an amount from 0 to 999999.99 with at most 2 decimals.'] }]);
    const largest = await api.patch(`/api/admin/merchants/${m.id}`, { platformFeeFixed: '999999.99' }, { token: admin });
    expect([largest.status, largest.body.platformFeeFixed]).toEqual([200, 999999.99]);
    // Offsets longer than storage holds are 400 naming the field (40 of them was a 500); 64 characters are kept.
    const offsets = (n: number) => Array.from({ length: n }, (_, i) => i + 1).join(',');
    const long = await api.patch(`/api/admin/merchants/${m.id}`, { billingRetryOffsetsDays: offsets(40) }, { token: admin });
    expect(long.status).toBe(400);
    expect(long.body.errors.billingRetryOffsetsDays).toBeDefined();
    const longest = `${offsets(22)},100,999`;
    expect(longest).toHaveLength(64);
    const kept = await api.patch(`/api/admin/merchants/${m.id}`, { billingRetryOffsetsDays: longest }, { token: admin });
    expect([kept.status, kept.body.billingRetryOffsetsDays]).toEqual([200, longest]);
    expect((await api.patch(`/api/admin/merchants/${randomUUID()}`, { platformFeeFixed: 1 }, { token: admin })).status).toBe(404);
  });

  it('takes the fixed fee in major units of the charge currency: 0.30 is 0 yen, the percentage whole yen', async () => {
    const yen = await billingMerchant({ plan: { amount: 2100, currency: 'JPY' }, merchant: { platformFeeFixed: 1.5 } });
    const sub = await yen.subscriber();
    expect(await run(T0)).toMatchObject({ charged: 1, succeeded: 1 });
    const [t] = await yen.transactions(sub.id);
    const gen = await api.post('/api/admin/fee-statements/generate', { merchantId: yen.id, periodStart: '2030-01-01', periodEnd: '2030-02-01', currency: 'JPY' }, { token: admin });
    expect(gen.status).toBe(201);
    // 1.5 % of 2,100 yen is 31.5 → 32 (half-even), and the fixed 1.50 → 2 yen: 34 yen, not 32 + 150.
    expect(gen.body).toMatchObject({ currency: 'JPY', transactionCount: 1, totalFees: 34, totalNet: 2066 });
    const lines = await api.get(`/api/FeeStatements/${gen.body.id}/lines`, { token: yen.key });
    expect(lines.body.items).toEqual([expect.objectContaining({ transactionId: t.id, amount: 2100, feeAmount: 34, netAmount: 2066 })]);
  });

  it('generates a statement in the currency of the period\'s charges when none is named; several currencies are 400 naming currency', async () => {
    const usd = await billingMerchant({ plan: { amount: 100, currency: 'USD' } });
    await usd.subscriber();
    expect(await run(T0)).toMatchObject({ charged: 1, succeeded: 1 });
    const period = { merchantId: usd.id, periodStart: '2030-01-01', periodEnd: '2030-02-01' };
    const gen = await api.post('/api/admin/fee-statements/generate', period, { token: admin });
    expect(gen.status, JSON.stringify(gen.body)).toBe(201);
    expect(gen.body).toMatchObject({ currency: 'USD', transactionCount: 1, totalFees: 1.8, totalNet: 98.2 });
    // A period without transactions: AUD, as before.
    expect((await api.post('/api/admin/fee-statements/generate', { ...period, periodStart: '2031-01-01', periodEnd: '2031-02-01' }, { token: admin })).body).toMatchObject({ currency: 'AUD', transactionCount: 0 });

    const product = await api.post('/api/Products', { merchantId: usd.id, name: `AUD ${unique()}` }, { token: usd.key });
    const aud = await api.post('/api/Plans', { merchantId: usd.id, productId: product.body.id, name: 'AUD', amount: 10, interval: 'Month' }, { token: usd.key });
    await usd.subscriber([CARD], { planId: aud.body.id, startDate: day(1) });
    expect(await run(day(1))).toMatchObject({ charged: 1, succeeded: 1 });
    const mixed = await api.post('/api/admin/fee-statements/generate', period, { token: admin });
    expect(mixed.status).toBe(400);
    expect(mixed.body.errors.currency[0]).toMatch(/AUD, USD/);
    expect((await api.post('/api/admin/fee-statements/generate', { ...period, currency: 'AUD' }, { token: admin })).body).toMatchObject({ currency: 'AUD', transactionCount: 1 });
  });

  it('refuses with 422, storing nothing, a statement whose totals exceed the largest amount; the lists stay readable (it was a 500, then every list a 500)', async () => {
    const m = await billingMerchant({ plan: { amount: '999999999999.99' } });
    await m.subscriber();
    expect(await run(T0)).toMatchObject({ charged: 1, succeeded: 1 });
    const period = { merchantId: m.id, periodStart: '2030-01-01', periodEnd: '2030-02-01' };
    // One charge of the largest amount: its statement can be stated.
    const draft = await api.post('/api/admin/fee-statements/generate', period, { token: admin });
    expect(draft.status, JSON.stringify(draft.body)).toBe(201);
    expect(draft.body).toMatchObject({ transactionCount: 1, totalNet: 984999999999.69 });

    await m.subscriber([CARD], { startDate: day(1) });
    expect(await run(day(1))).toMatchObject({ charged: 1, succeeded: 1 });
    const over = await api.post('/api/admin/fee-statements/generate', period, { token: admin });
    expect(over.status, JSON.stringify(over.body)).toBe(422);
    expect(over.body).toMatchObject({ status: 422, traceId: expect.any(String) });
    expect(over.body.detail).toMatch(/999,?999,?999,?999\.99|999999999999\.99/);
    // Finalising the Draft would take the second charge too: 422, the Draft unchanged.
    const finalise = await api.post(`/api/admin/fee-statements/${draft.body.id}/finalise`, {}, { token: admin });
    expect(finalise.status, JSON.stringify(finalise.body)).toBe(422);
    const listed = await api.get(`/api/admin/fee-statements?merchantId=${m.id}`, { token: admin });
    expect(listed.status, JSON.stringify(listed.body)).toBe(200);
    expect(listed.body.items).toHaveLength(1);
    expect(listed.body.items[0]).toMatchObject({ id: draft.body.id, status: 'Draft', transactionCount: 1 });
    expect((await api.get('/api/admin/fee-statements', { token: admin })).status).toBe(200);
    expect((await api.get('/api/FeeStatements', { token: m.key })).status).toBe(200);
  });

  it('credits on the next closed statement the fee of a charge billed while Processing that failed at settlement, once, in its currency', async () => {
    // In USD: a period whose only line is the reversal is stated in the reversal's currency (it was
    // an empty AUD statement, the credit left out of the statement generated without a currency).
    const m = await billingMerchant({ merchant: { bankSettlementWindowDays: 3 }, plan: { amount: 100, currency: 'USD' } });
    await m.subscriber([{ ...BANK, last4: '9002' }], { startDate: '2030-01-31T12:00:00.000Z' });
    expect(await run('2030-01-31T12:00:00.000Z')).toMatchObject({ charged: 1, failed: 0 });
    const statement = (periodStart: string, periodEnd: string) => closedStatement(m, periodStart, periodEnd);
    const january = await statement('2030-01-01', '2030-02-01');
    expect(january).toMatchObject({ currency: 'USD', totalFees: 1.8, totalNet: 98.2, transactionCount: 1 });
    const [billed] = january.lines;
    expect(billed).toMatchObject({ status: 'Processing', amount: 100, feeAmount: 1.8, netAmount: 98.2 });

    expect(await run('2030-02-03T12:00:00.000Z')).toMatchObject({ failed: 1 });
    const february = await statement('2030-02-01', '2030-03-01');
    expect(february).toMatchObject({ currency: 'USD', totalFees: -1.8, totalNet: -98.2, transactionCount: 1 });
    expect(february.lines).toEqual([
      expect.objectContaining({ transactionId: billed.transactionId, status: 'Failed', occurredAt: '2030-02-03T12:00:00.000Z', amount: -100, feeAmount: -1.8, netAmount: -98.2 }),
    ]);
    expect(february.lines[0].description).toContain(january.reference);
    // Once: a later or overlapping statement does not credit it again.
    expect(await statement('2030-02-01', '2030-04-01')).toMatchObject({ totalFees: 0, transactionCount: 0 });
  });

  it('takes back on the next closed statement a refund billed while Processing that the provider then refused, once', async () => {
    const { m, charge, refund, refunds } = await settledCharge();
    const statement = (periodStart: string, periodEnd: string) => closedStatement(m, periodStart, periodEnd);
    // The provider is down: the refund's outcome is unknown, so it stays Processing.
    await fault(m.id, { down: true });
    expect((await refund({ amount: 40 })).status).toBe(502);
    await fault(m.id, null);
    const [pending] = await refunds();
    expect(pending).toMatchObject({ status: 'Processing', amount: 40 });
    const around = (ms: number) => new Date(new Date(pending.occurredAt).getTime() + ms).toISOString();
    const billed = await statement(around(-86_400_000), around(86_400_000));
    expect(billed).toMatchObject({ totalFees: 0, totalNet: -40, transactionCount: 1 });
    expect(billed.lines).toEqual([expect.objectContaining({ transactionId: pending.id, status: 'Processing', amount: -40, feeAmount: 0, netAmount: -40 })]);

    // Repeated at the next run, the call names a charge the provider does not know: refused for good.
    await db.query(`update billing.transactions set provider_ref = 'ch_unknown' where id = $1`, [charge.id]);
    await run(T0);
    expect(await refunds()).toMatchObject([{ id: pending.id, status: 'Failed', failureReason: 'provider_rejected' }]);
    const next = await statement('2030-01-01', '2030-02-01');
    const reversal = next.lines.filter((l) => l.transactionId === pending.id);
    expect(reversal).toEqual([expect.objectContaining({ status: 'Failed', amount: 40, feeAmount: 0, netAmount: 40 })]);
    expect(reversal[0].description).toContain(billed.reference);
    // The statement's charge line (100.00, fee 1.80) and the reversal: the merchant is no longer credited the 40.00.
    expect(next).toMatchObject({ totalFees: 1.8, totalNet: 138.2, transactionCount: 2 });
    // Once: a later or overlapping statement does not take it back again.
    expect(await statement('2030-01-01', '2030-03-01')).toMatchObject({ totalNet: 0, transactionCount: 0 });
  });

  it('bills a transaction on one closed statement at most: overlapping periods, even finalised at once, never charge a fee twice', async () => {
    const m = await billingMerchant({ plan: { amount: 50 } });
    const subs = [await m.subscriber(), await m.subscriber()];
    expect(await run(T0)).toMatchObject({ charged: 2, succeeded: 2 });
    const charges = (await Promise.all(subs.map((s) => m.transactions(s.id)))).flat().map((t) => t.id).sort();
    const generate = async (periodStart: string, periodEnd: string) => {
      const res = await api.post('/api/admin/fee-statements/generate', { merchantId: m.id, periodStart, periodEnd }, { token: admin });
      expect(res.status).toBe(201);
      return res.body;
    };
    const lineIds = async (id: string) => (await api.get(`/api/FeeStatements/${id}/lines`, { token: m.key })).body.items.map((l: { transactionId: string }) => l.transactionId).sort();
    // Drafts are not bills: two overlapping drafts both show the period's charges.
    const a = await generate('2030-01-01', '2030-02-01');
    const b = await generate('2029-12-01', '2030-01-20');
    expect([a.transactionCount, b.transactionCount]).toEqual([2, 2]);
    // Finalised at the same time, each charge lands on exactly one of them.
    const [fa, fb] = await Promise.all([a, b].map((s) => api.post(`/api/admin/fee-statements/${s.id}/finalise`, {}, { token: admin })));
    expect([fa!.status, fb!.status]).toEqual([200, 200]);
    expect(fa!.body.transactionCount + fb!.body.transactionCount).toBe(2);
    expect([...(await lineIds(a.id)), ...(await lineIds(b.id))].sort()).toEqual(charges);
    expect(fa!.body.totalFees + fb!.body.totalFees).toBeCloseTo(2 * (0.75 + 0.3), 10);
    // A later statement over the same period has nothing left to bill.
    const c = await generate('2030-01-01', '2030-02-01');
    expect(c).toMatchObject({ transactionCount: 0, totalFees: 0, totalNet: 0 });
  });

  it('refuses a period bound in year 0000 (it was a 500)', async () => {
    const m = await createMerchant(api, admin);
    const res = await api.post('/api/admin/fee-statements/generate', { merchantId: m.id, periodStart: '0000-01-01T00:00:00Z', periodEnd: '0000-12-01' }, { token: admin });
    expect(res.status).toBe(400);
    expect(Object.keys(res.body.errors).sort()).toEqual(['periodEnd', 'periodStart']);
  });

  it('reads paymentReference and notes as strings, never null: empty until pay sets them, and when pay leaves them out', async () => {
    const m = await billingMerchant();
    const period = { merchantId: m.id, periodStart: '2020-01-01', periodEnd: '2020-02-01' };
    const gen = await api.post('/api/admin/fee-statements/generate', period, { token: admin });
    expect(gen.status).toBe(201);
    expect(gen.body).toMatchObject({ status: 'Draft', paymentReference: '', notes: '', finalisedAt: null, paidAt: null });
    expect((await api.post(`/api/admin/fee-statements/${gen.body.id}/finalise`, {}, { token: admin })).body).toMatchObject({ paymentReference: '', notes: '' });
    const pay = await api.post(`/api/admin/fee-statements/${gen.body.id}/pay`, {}, { token: admin });
    expect(pay.status).toBe(200);
    expect(pay.body.statement).toMatchObject({ status: 'Paid', paymentReference: '', notes: '' });
    expect((await api.get(`/api/FeeStatements/${gen.body.id}`, { token: m.key })).body).toMatchObject({ paymentReference: '', notes: '' });
    expect((await api.get(`/api/admin/fee-statements?merchantId=${m.id}`, { token: admin })).body.items[0]).toMatchObject({ paymentReference: '', notes: '' });
    // The events say it as the reads do.
    expect((await outbox('fee_statement.finalised', 'id', gen.body.id))[0]).toMatchObject({ paymentReference: '' });
    expect((await outbox('fee_statement.paid', 'id', gen.body.id))[0]).toMatchObject({ paymentReference: '' });
  });

  it('generates, finalises and pays a statement whose totals are the sums of its lines', async () => {
    const m = await billingMerchant({ merchant: { platformFeePercent: 2.9, platformFeeFixed: 0.25 }, plan: { amount: 123.45 } });
    const subs = [await m.subscriber(), await m.subscriber(), await m.subscriber([{ ...CARD, last4: '0002' }])];
    await run(T0);
    const [charge] = await m.transactions(subs[0]!.id);
    expect((await api.post(`/api/Transactions/${charge.id}/refund`, { amount: 23.45 }, { token: m.key, headers: idempotent() })).status).toBe(201);

    // Charges occur at the run's asOf (2030), the refund at the real time of the request.
    const period = { merchantId: m.id, periodStart: '2020-01-01', periodEnd: '2030-02-01' };
    const gen = await api.post('/api/admin/fee-statements/generate', period, { token: admin });
    expect(gen.status).toBe(201);
    // Two charges of 123.45: fee 2.9 % = 3.58005 → 3.58, + 0.25 = 3.83 each; a refund of 23.45.
    expect(gen.body).toMatchObject({ status: 'Draft', merchantId: m.id, currency: 'AUD', transactionCount: 3, totalFees: 7.66, finalisedAt: null, paidAt: null });
    expect(gen.body.totalNet).toBe(215.79);
    const id = gen.body.id;

    const lines = await api.get(`/api/FeeStatements/${id}/lines?page=1&pageSize=2`, { token: m.key });
    expect(lines.body).toMatchObject({ page: 1, pageSize: 2, totalCount: 3, totalPages: 2, hasNextPage: true, hasPreviousPage: false });
    const page2 = await api.get(`/api/FeeStatements/${id}/lines?page=2&pageSize=2`, { token: m.key });
    const all = [...lines.body.items, ...page2.body.items];
    const cents = (xs: number[]) => xs.reduce((n, x) => n + Math.round(x * 100), 0);
    expect(cents(all.map((l) => l.feeAmount))).toBe(766);
    expect(cents(all.map((l) => l.netAmount))).toBe(21579);
    expect(all.find((l) => l.amount < 0)).toMatchObject({ amount: -23.45, feeAmount: 0, netAmount: -23.45, status: 'Settled' });
    expect(all.filter((l) => l.amount > 0).map((l) => [l.amount, l.feeAmount, l.netAmount])).toEqual([[123.45, 3.83, 119.62], [123.45, 3.83, 119.62]]);

    const fin = await api.post(`/api/admin/fee-statements/${id}/finalise`, {}, { token: admin });
    expect(fin.status).toBe(200);
    expect(fin.body).toMatchObject({ status: 'Finalised', totalFees: 7.66 });
    expect((await api.post(`/api/admin/fee-statements/${id}/finalise`, {}, { token: admin })).status).toBe(409);
    // Lines are frozen: a new charge in the period does not change the finalised statement.
    await m.subscriber([CARD], { startDate: '2030-01-20T00:00:00Z' });
    await run('2030-01-20T00:00:00Z');
    expect((await api.get(`/api/FeeStatements/${id}`, { token: m.key })).body).toMatchObject({ transactionCount: 3, totalFees: 7.66 });

    const pay = await api.post(`/api/admin/fee-statements/${id}/pay`, { statementId: randomUUID(), paymentReference: 'EFT-123', notes: 'paid by EFT' }, { token: admin });
    expect(pay.status).toBe(200);
    expect(pay.body.statement).toMatchObject({ id, status: 'Paid', paymentReference: 'EFT-123', notes: 'paid by EFT' });
    expect(pay.body.statement.paidAt).toBeTruthy();
    expect(pay.body.lines).toMatchObject({ page: 1, pageSize: 50, totalCount: 3, totalPages: 1, hasNextPage: false, hasPreviousPage: false });
    expect(pay.body.lines.items).toHaveLength(3);
    expect((await api.post(`/api/admin/fee-statements/${id}/pay`, {}, { token: admin })).status).toBe(409);
    expect((await api.post(`/api/admin/fee-statements/${randomUUID()}/pay`, {}, { token: admin })).status).toBe(404);

    const draft = (await api.post('/api/admin/fee-statements/generate', period, { token: admin })).body;
    expect((await api.post(`/api/admin/fee-statements/${draft.id}/pay`, {}, { token: admin })).status).toBe(409);
    expect((await api.get(`/api/admin/fee-statements?merchantId=${m.id}&status=Paid`, { token: admin })).body.items.map((s: any) => s.id)).toEqual([id]);
    expect((await api.get(`/api/admin/fee-statements?merchantId=${m.id}`, { token: admin })).body.totalCount).toBe(2);
    expect((await api.get('/api/FeeStatements', { token: m.key })).body.totalCount).toBe(2);
    expect((await api.get('/api/FeeStatements', { token: (await billingMerchant()).key })).body.totalCount).toBe(0);
    expect((await api.get(`/api/FeeStatements/${id}`, { token: (await billingMerchant()).key })).status).toBe(404);
    expect((await api.get('/api/admin/fee-statements', { token: m.key })).status).toBe(401);
    expect((await api.post('/api/admin/fee-statements/generate', { ...period, periodEnd: '2019-01-01' }, { token: admin })).status).toBe(400);
    expect((await api.post('/api/admin/fee-statements/generate', { ...period, merchantId: randomUUID() }, { token: admin })).status).toBe(404);
    expect((await api.post(`/api/admin/fee-statements/${randomUUID()}/finalise`, {}, { token: admin })).status).toBe(404);

    expect(await outbox('fee_statement.finalised', 'id', id)).toHaveLength(1);
    expect((await outbox('fee_statement.paid', 'id', id))[0]).toMatchObject({ statementId: id, merchantId: m.id, status: 'Paid', totalFees: 7.66, paymentReference: 'EFT-123' });
  });
});

describe('published events', () => {
  // Runs last: it reads what every test above published (charges, refunds, retries, statements,
  // subscriptions, members, payment methods, checkouts). Webhook consumers read `data` by the
  // schemas the API reference publishes; a field the producers send that no schema names is
  // undocumented, and a required field they leave out breaks the consumer.
  it('carry data their published schemas describe exactly: every field named there, every required one present', async () => {
    const { mismatches, types } = await eventsAgainstPublishedSchemas(db);
    expect(mismatches).toEqual([]);
    // Not vacuous: the tests above published each kind of event the billing engine sends.
    for (const t of ['transaction.succeeded', 'transaction.failed', 'transaction.refunded', 'fee_statement.finalised', 'fee_statement.paid', 'subscription.created', 'subscription.past_due', 'subscription.recovered', 'member.created', 'payment_method.added']) expect(types).toContain(t);
  });
});
