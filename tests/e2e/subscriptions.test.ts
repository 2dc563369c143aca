import { randomUUID } from 'node:crypto';
import pg from 'pg';
import { afterAll, beforeAll, describe, expect, inject, it } from 'vitest';
import { addPaymentMethod, createMember, idempotent, outboxEvents, setUpMerchant, type TestMerchant } from '../support/billing-fixtures.js';
import { apiClient, createMerchantUser } from '../support/fixtures.js';

const api = apiClient(inject('gatewayUrl'));
const admin = inject('adminToken');
const db = new pg.Pool({ connectionString: inject('databaseUrl'), max: 2 });
afterAll(() => db.end());

const SUBSCRIPTION_FIELDS = [
  'id', 'merchantId', 'memberId', 'planId', 'paymentMethodId', 'status', 'currentPeriodStart', 'currentPeriodEnd', 'nextBillingAt',
  'cancelAtPeriodEnd', 'pausedAt', 'resumeAt', 'cancelledAt', 'createdAt', 'updatedAt',
];

let a: TestMerchant;
let b: TestMerchant;

beforeAll(async () => {
  a = await setUpMerchant(api, admin);
  b = await setUpMerchant(api, admin);
});

const subscribe = (body: Record<string, unknown>, m: TestMerchant = a, token = m.key) =>
  api.post('/api/Subscriptions', { merchantId: m.id, planId: m.planId, ...body }, { token, headers: idempotent() });
const act = (id: string, action: 'pause' | 'resume' | 'cancel', body: Record<string, unknown> = {}, token = a.key) =>
  api.post(`/api/Subscriptions/${id}/${action}`, body, { token, headers: idempotent() });

describe('POST /api/Subscriptions', () => {
  it('creates an Active subscription billed in advance (201, Location) and records subscription.created', async () => {
    const member = await createMember(api, a);
    const pm = await addPaymentMethod(api, a, member.id);
    const before = Date.now();
    const res = await subscribe({ memberId: member.id, paymentMethodId: pm.id });
    expect(res.status).toBe(201);
    expect(res.headers.get('location')).toBe(`/api/Subscriptions/${res.body.id}`);
    expect(Object.keys(res.body).sort()).toEqual([...SUBSCRIPTION_FIELDS].sort());
    const s = res.body;
    expect(s).toMatchObject({ merchantId: a.id, memberId: member.id, planId: a.planId, paymentMethodId: pm.id, status: 'Active', cancelAtPeriodEnd: false, pausedAt: null, resumeAt: null, cancelledAt: null });
    const start = Date.parse(s.currentPeriodStart);
    expect(start).toBeGreaterThanOrEqual(before - 1000);
    expect(s.nextBillingAt).toBe(s.currentPeriodStart);
    const end = new Date(start);
    end.setUTCMonth(end.getUTCMonth() + 1);
    if (end.getUTCDate() !== new Date(start).getUTCDate()) end.setUTCDate(0); // month-end clamp
    expect(s.currentPeriodEnd).toBe(end.toISOString());
    expect((await api.get(`/api/Subscriptions/${s.id}`, { token: a.key })).body).toEqual(s);
    const events = await outboxEvents(db, 'subscription.created', s.id);
    expect(events).toHaveLength(1);
    expect(events[0]!.data).toMatchObject({ id: s.id, status: 'Active', memberId: member.id });
  });

  it('starts at startDate, and a trial makes the first charge due when it ends', async () => {
    const member = await createMember(api, a);
    const res = await subscribe({ memberId: member.id, startDate: '2030-01-31' });
    expect(res.status).toBe(201);
    expect(res.body).toMatchObject({ currentPeriodStart: '2030-01-31T00:00:00.000Z', currentPeriodEnd: '2030-02-28T00:00:00.000Z', nextBillingAt: '2030-01-31T00:00:00.000Z', paymentMethodId: null });
    const trialPlan = await api.post('/api/Plans', { merchantId: a.id, productId: a.productId, name: 'Weekly with trial', amount: 9.5, interval: 'Week', trialDays: 14 }, { token: a.key });
    const trial = await subscribe({ memberId: member.id, planId: trialPlan.body.id, startDate: '2030-03-01T09:00:00Z' });
    expect(trial.status).toBe(201);
    expect(trial.body).toMatchObject({ currentPeriodStart: '2030-03-01T09:00:00.000Z', currentPeriodEnd: '2030-03-15T09:00:00.000Z', nextBillingAt: '2030-03-15T09:00:00.000Z' });
  });

  it('allows one live subscription per member and plan: 20 parallel creates with different keys give one 201 and 19 409s', async () => {
    const member = await createMember(api, a);
    const results = await Promise.all(Array.from({ length: 20 }, () => subscribe({ memberId: member.id })));
    const createdOnes = results.filter((r) => r.status === 201);
    const conflicts = results.filter((r) => r.status === 409);
    expect(createdOnes).toHaveLength(1);
    expect(conflicts).toHaveLength(19);
    const id = createdOnes[0]!.body.id;
    for (const c of conflicts) {
      expect(c.headers.get('content-type')).toMatch(/application\/problem\+json/);
      expect(c.body.existingSubscriptionId).toBe(id);
      expect(c.body.type).toMatch(/subscription-exists$/);
    }
    const rows = await db.query(`select count(*)::int as n from billing.subscriptions where member_id = $1 and status <> 'Cancelled'`, [member.id]);
    expect(rows.rows[0].n).toBe(1);
    expect(await outboxEvents(db, 'subscription.created', id)).toHaveLength(1);
  });

  it('allows a new subscription once the live one is cancelled', async () => {
    const member = await createMember(api, a);
    const first = await subscribe({ memberId: member.id });
    expect((await subscribe({ memberId: member.id })).status).toBe(409);
    expect((await act(first.body.id, 'cancel')).status).toBe(200);
    expect((await subscribe({ memberId: member.id })).status).toBe(201);
  });

  it('refuses an inactive plan with 422', async () => {
    const member = await createMember(api, a);
    const plan = await api.post('/api/Plans', { merchantId: a.id, productId: a.productId, name: 'Retired', amount: 5, interval: 'Month', isActive: false }, { token: a.key });
    const res = await subscribe({ memberId: member.id, planId: plan.body.id });
    expect(res.status).toBe(422);
    expect(res.body.type).toMatch(/unprocessable$/);
  });

  it("refuses another merchant's member, plan or payment method (404), and another member's method (400)", async () => {
    const member = await createMember(api, a);
    const other = await createMember(api, a);
    const memberOfB = await createMember(api, b);
    const pmOfB = await addPaymentMethod(api, b, memberOfB.id);
    const pmOfOther = await addPaymentMethod(api, a, other.id);
    expect((await subscribe({ memberId: memberOfB.id })).status).toBe(404);
    expect((await subscribe({ memberId: member.id, planId: b.planId })).status).toBe(404);
    expect((await subscribe({ memberId: member.id, paymentMethodId: pmOfB.id })).status).toBe(404);
    expect((await subscribe({ memberId: randomUUID() })).status).toBe(404);
    const wrongMember = await subscribe({ memberId: member.id, paymentMethodId: pmOfOther.id });
    expect(wrongMember.status).toBe(400);
    expect(wrongMember.body.errors).toHaveProperty('paymentMethodId');
    expect((await subscribe({ memberId: member.id }, b, a.key)).status).toBe(403);
  });

  it('validates the body and requires an Idempotency-Key', async () => {
    const member = await createMember(api, a);
    const bad = await subscribe({ memberId: 'nope', startDate: 'yesterday' });
    expect(bad.status).toBe(400);
    expect(Object.keys(bad.body.errors).sort()).toEqual(['memberId', 'startDate']);
    const noKey = await api.post('/api/Subscriptions', { merchantId: a.id, memberId: member.id, planId: a.planId }, { token: a.key });
    expect(noKey.status).toBe(400);
  });

  it('refuses a startDate outside the years 0001 to 9999 UTC (year 0000 was a 500)', async () => {
    const member = await createMember(api, a);
    for (const startDate of ['0000-01-01T00:00:00Z', '0000-06-01', '9999-12-31T23:30:00-01:00']) {
      const res = await subscribe({ memberId: member.id, startDate });
      expect(res.status, startDate).toBe(400);
      expect(res.body.errors.startDate, startDate).toBeDefined();
    }
    const latest = await subscribe({ memberId: member.id, startDate: '9999-12-31T00:00:00Z' });
    expect(latest.status).toBeLessThan(500);
  });

  it('needs the Staff role', async () => {
    const member = await createMember(api, a);
    const viewer = await createMerchantUser(api, admin, a.id, 'Viewer');
    const staff = await createMerchantUser(api, admin, a.id, 'Staff');
    expect((await subscribe({ memberId: member.id }, a, viewer.token)).status).toBe(403);
    expect((await subscribe({ memberId: member.id }, a, staff.token)).status).toBe(201);
  });
});

describe('subscription transitions', () => {
  async function live(): Promise<{ id: string; memberId: string }> {
    const member = await createMember(api, a);
    const res = await subscribe({ memberId: member.id });
    expect(res.status).toBe(201);
    return res.body;
  }

  it('pauses, refuses a second pause, resumes and refuses resuming an Active one', async () => {
    const s = await live();
    const resumeAt = new Date(Date.now() + 7 * 86_400_000).toISOString();
    const paused = await act(s.id, 'pause', { resumeAt });
    expect(paused.status).toBe(200);
    expect(paused.body).toMatchObject({ id: s.id, status: 'Paused', resumeAt });
    expect(paused.body.pausedAt).not.toBeNull();
    const again = await act(s.id, 'pause');
    expect(again.status).toBe(409);
    expect(again.body.type).toMatch(/invalid-transition$/);
    const resumed = await act(s.id, 'resume');
    expect(resumed.status).toBe(200);
    expect(resumed.body).toMatchObject({ status: 'Active', pausedAt: null, resumeAt: null });
    expect((await act(s.id, 'resume')).status).toBe(409);
    expect(await outboxEvents(db, 'subscription.paused', s.id)).toHaveLength(1);
    expect(await outboxEvents(db, 'subscription.resumed', s.id)).toHaveLength(1);
  });

  it('pauses without a body, and refuses a resumeAt in the past', async () => {
    const s = await live();
    expect((await act(s.id, 'pause', { resumeAt: '2001-01-01T00:00:00Z' })).status).toBe(400);
    const res = await api.post(`/api/Subscriptions/${s.id}/pause`, undefined, { token: a.key, headers: idempotent() });
    expect(res.status).toBe(200);
    expect(res.body.status).toBe('Paused');
  });

  it('cancels at period end by flagging, then cancels now; nothing happens to a Cancelled one', async () => {
    const s = await live();
    const flagged = await act(s.id, 'cancel', { atPeriodEnd: true });
    expect(flagged.status).toBe(200);
    expect(flagged.body).toMatchObject({ status: 'Active', cancelAtPeriodEnd: true, cancelledAt: null });
    expect(await outboxEvents(db, 'subscription.cancelled', s.id)).toHaveLength(0);
    const cancelled = await act(s.id, 'cancel');
    expect(cancelled.status).toBe(200);
    expect(cancelled.body).toMatchObject({ status: 'Cancelled', nextBillingAt: null, cancelAtPeriodEnd: false });
    expect(cancelled.body.cancelledAt).not.toBeNull();
    for (const action of ['pause', 'resume', 'cancel'] as const) {
      const res = await act(s.id, action);
      expect(res.status, action).toBe(409);
    }
    const events = await outboxEvents(db, 'subscription.cancelled', s.id);
    expect(events).toHaveLength(1);
    expect(events[0]!.data.status).toBe('Cancelled');
  });

  it('cancels a Paused subscription at once even when asked for period end', async () => {
    const s = await live();
    await act(s.id, 'pause');
    const res = await act(s.id, 'cancel', { atPeriodEnd: true });
    expect(res.body.status).toBe('Cancelled');
  });

  it("answers 404 for another merchant's subscription and 400 for a body id that differs from the path", async () => {
    const s = await live();
    expect((await api.get(`/api/Subscriptions/${s.id}`, { token: b.key })).status).toBe(404);
    expect((await act(s.id, 'pause', {}, b.key)).status).toBe(404);
    expect((await act(s.id, 'pause', { id: randomUUID() })).status).toBe(400);
    expect((await act(s.id, 'cancel', { merchantId: b.id })).status).toBe(403);
    expect((await act(randomUUID(), 'cancel')).status).toBe(404);
  });

  it('replays a retried pause with the same Idempotency-Key instead of answering 409', async () => {
    const s = await live();
    const headers = idempotent();
    const first = await api.post(`/api/Subscriptions/${s.id}/pause`, {}, { token: a.key, headers });
    const retry = await api.post(`/api/Subscriptions/${s.id}/pause`, {}, { token: a.key, headers });
    expect([first.status, retry.status]).toEqual([200, 200]);
    expect(retry.body).toEqual(first.body);
  });
});

describe('listing subscriptions', () => {
  it('filters by member and status, paged', async () => {
    const member = await createMember(api, a);
    const s = (await subscribe({ memberId: member.id })).body;
    const byMember = await api.get(`/api/Subscriptions?merchantId=${a.id}&memberId=${member.id}`, { token: a.key });
    expect(byMember.status).toBe(200);
    expect(byMember.body).toMatchObject({ totalCount: 1, page: 1, hasNextPage: false });
    expect(byMember.body.items).toEqual([s]);
    await act(s.id, 'pause');
    const paused = await api.get(`/api/Subscriptions?memberId=${member.id}&status=Paused`, { token: a.key });
    expect(paused.body.items.map((x: { id: string }) => x.id)).toEqual([s.id]);
    expect((await api.get(`/api/Subscriptions?memberId=${member.id}&status=Active`, { token: a.key })).body.totalCount).toBe(0);
    expect((await api.get('/api/Subscriptions?status=Sleeping', { token: a.key })).status).toBe(400);
    expect((await api.get(`/api/Subscriptions?merchantId=${b.id}`, { token: a.key })).status).toBe(403);
  });
});
