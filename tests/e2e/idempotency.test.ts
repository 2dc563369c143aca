import { randomUUID } from 'node:crypto';
import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { apiClient, createApiKey, createMerchant, eventually, unique, type ApiClient } from '../support/fixtures.js';
import { startTestPlatform, type TestPlatform } from '../support/platform.js';

/**
 * The Idempotency-Key rules (interface.md, contract.md §3) on POST /api/Subscriptions. Runs its
 * own platform because it restarts the gateway, stops billing and kills processes.
 */
const LEASE_SECONDS = 15;

let platform: TestPlatform;
let api: ApiClient;
let db: pg.Pool;

interface Merchant {
  id: string;
  key: string;
  planId: string;
}

let a: Merchant;
let b: Merchant;

async function setUpMerchant(): Promise<Merchant> {
  const m = await createMerchant(api, platform.adminToken);
  const { key } = await createApiKey(api, platform.adminToken, m.id);
  const product = await api.post('/api/Products', { merchantId: m.id, name: 'Gym' }, { token: key });
  expect(product.status).toBe(201);
  const plan = await api.post('/api/Plans', { merchantId: m.id, productId: product.body.id, name: 'Monthly', amount: 19.95, interval: 'Month' }, { token: key });
  expect(plan.status).toBe(201);
  return { id: m.id, key, planId: plan.body.id };
}

async function newMember(m: Merchant): Promise<string> {
  const res = await api.post('/api/Members', { merchantId: m.id, email: `${unique('member')}@example.com`, firstName: 'Ada', lastName: 'Lovelace' }, { token: m.key });
  expect(res.status).toBe(201);
  return res.body.id;
}

const subscribe = (m: Merchant, body: Record<string, unknown>, key: string | undefined) =>
  api.post('/api/Subscriptions', body, { token: m.key, headers: key === undefined ? {} : { 'idempotency-key': key } });

async function subscriptionsOf(m: Merchant, memberId: string): Promise<{ id: string }[]> {
  const res = await api.get(`/api/Subscriptions?merchantId=${m.id}&memberId=${memberId}`, { token: m.key });
  expect(res.status).toBe(200);
  return res.body.items;
}

beforeAll(async () => {
  platform = await startTestPlatform({ serviceEnv: { gateway: { IDEMPOTENCY_LEASE_SECONDS: String(LEASE_SECONDS) } } });
  api = apiClient(platform.gatewayUrl!);
  db = new pg.Pool({ connectionString: platform.databaseUrl, max: 2 });
  a = await setUpMerchant();
  b = await setUpMerchant();
}, 180_000);

afterAll(async () => {
  await db?.end();
  await platform?.stop();
});

describe('the Idempotency-Key header', () => {
  it('is required: 400 naming Idempotency-Key before anything runs', async () => {
    const memberId = await newMember(a);
    const res = await subscribe(a, { merchantId: a.id, memberId, planId: a.planId }, undefined);
    expect(res.status).toBe(400);
    expect(res.headers.get('content-type')).toMatch(/^application\/problem\+json/);
    expect(res.body.errors).toHaveProperty('Idempotency-Key');
    expect(await subscriptionsOf(a, memberId)).toHaveLength(0);
  });

  it('is refused when empty or over 255 characters; 255 is accepted', async () => {
    const memberId = await newMember(a);
    const body = { merchantId: a.id, memberId, planId: a.planId };
    for (const key of ['', 'k'.repeat(256)]) {
      const res = await subscribe(a, body, key);
      expect(res.status).toBe(400);
      expect(res.body.errors).toHaveProperty('Idempotency-Key');
    }
    expect(await subscriptionsOf(a, memberId)).toHaveLength(0);
    expect((await subscribe(a, body, randomUUID().padEnd(255, 'k'))).status).toBe(201);
  });
});

describe('retries with the same key', () => {
  it('replay a 201 with its status, body and Location, marked Idempotent-Replayed', async () => {
    const memberId = await newMember(a);
    const body = { merchantId: a.id, memberId, planId: a.planId };
    const key = randomUUID();
    const first = await subscribe(a, body, key);
    expect(first.status).toBe(201);
    expect(first.headers.get('location')).toMatch(new RegExp(`${first.body.id}$`));
    expect(first.headers.get('idempotent-replayed')).toBeNull();
    const again = await subscribe(a, body, key);
    expect(again.status).toBe(201);
    expect(again.body).toEqual(first.body);
    expect(again.headers.get('location')).toBe(first.headers.get('location'));
    expect(again.headers.get('idempotent-replayed')).toBe('true');
    expect(await subscriptionsOf(a, memberId)).toHaveLength(1);
  });

  it('with a different body: 409 idempotency-key-reused', async () => {
    const key = randomUUID();
    const first = await subscribe(a, { merchantId: a.id, memberId: await newMember(a), planId: a.planId }, key);
    expect(first.status).toBe(201);
    const otherMember = await newMember(a);
    const res = await subscribe(a, { merchantId: a.id, memberId: otherMember, planId: a.planId }, key);
    expect(res.status).toBe(409);
    expect(res.body.type).toMatch(/idempotency-key-reused$/);
    expect(await subscriptionsOf(a, otherMember)).toHaveLength(0);
  });

  it('after a 4xx run again (same body), and still refuse a different body', async () => {
    const memberId = await newMember(a);
    const body = { merchantId: a.id, memberId, planId: a.planId };
    const existing = await subscribe(a, body, randomUUID());
    expect(existing.status).toBe(201);

    const key = randomUUID();
    const first = await subscribe(a, body, key);
    expect(first.status).toBe(409);
    expect(first.body.existingSubscriptionId).toBe(existing.body.id);
    expect((await api.post(`/api/Subscriptions/${existing.body.id}/cancel`, {}, { token: a.key, headers: { 'idempotency-key': randomUUID() } })).status).toBe(200);

    // The same request runs again (rule 6): the member has no live subscription any more.
    const again = await subscribe(a, body, key);
    expect(again.status).toBe(201);
    expect(again.headers.get('idempotent-replayed')).toBeNull();
    expect(again.body.id).not.toBe(existing.body.id);

    const otherKey = randomUUID();
    expect((await subscribe(a, body, otherKey)).status).toBe(409);
    const different = await subscribe(a, { ...body, startDate: '2030-01-01' }, otherKey);
    expect(different.status).toBe(409);
    expect(different.body.type).toMatch(/idempotency-key-reused$/);
  });

  it('after a body that failed validation: 400 again for it, 409 for a corrected one', async () => {
    const key = randomUUID();
    const invalid = { merchantId: a.id, memberId: 'not-a-uuid', planId: a.planId };
    const first = await subscribe(a, invalid, key);
    expect(first.status).toBe(400);
    expect(first.body.errors).toHaveProperty('memberId');
    expect((await subscribe(a, invalid, key)).status).toBe(400);
    const corrected = await subscribe(a, { ...invalid, memberId: await newMember(a) }, key);
    expect(corrected.status).toBe(409);
    expect(corrected.body.type).toMatch(/idempotency-key-reused$/);
  });
});

describe('concurrent requests', () => {
  it('20 identical requests with one key create exactly one subscription', async () => {
    const memberId = await newMember(a);
    const body = { merchantId: a.id, memberId, planId: a.planId };
    const key = randomUUID();
    const results = await Promise.all(Array.from({ length: 20 }, () => subscribe(a, body, key)));
    const originals = results.filter((r) => r.status === 201 && r.headers.get('idempotent-replayed') === null);
    expect(originals).toHaveLength(1);
    const id = originals[0].body.id;
    for (const r of results) {
      if (r.status === 201) expect(r.body.id).toBe(id);
      else {
        expect(r.status).toBe(409);
        expect(r.body.type).toMatch(/idempotency-in-progress$/);
        expect(r.body.detail).toMatch(/still in progress/);
      }
    }
    const listed = await subscriptionsOf(a, memberId);
    expect(listed.map((s) => s.id)).toEqual([id]);
  });

  it('20 requests with different keys for one member and plan create one; the rest name it', async () => {
    const memberId = await newMember(a);
    const body = { merchantId: a.id, memberId, planId: a.planId };
    const results = await Promise.all(Array.from({ length: 20 }, () => subscribe(a, body, randomUUID())));
    const created = results.filter((r) => r.status === 201);
    expect(created).toHaveLength(1);
    for (const r of results.filter((x) => x.status !== 201)) {
      expect(r.status).toBe(409);
      expect(r.body.existingSubscriptionId).toBe(created[0].body.id);
    }
    expect(await subscriptionsOf(a, memberId)).toHaveLength(1);
  });
});

describe('scope', () => {
  it('is the merchant: the same key from two merchants runs for each', async () => {
    const key = randomUUID();
    const ra = await subscribe(a, { merchantId: a.id, memberId: await newMember(a), planId: a.planId }, key);
    const rb = await subscribe(b, { merchantId: b.id, memberId: await newMember(b), planId: b.planId }, key);
    expect([ra.status, rb.status]).toEqual([201, 201]);
    expect(rb.headers.get('idempotent-replayed')).toBeNull();
    expect(rb.body.merchantId).toBe(b.id);
  });

  it("is the merchant for the platform admin too: the admin repeating a merchant's key replays, by body merchantId or the path's resource", async () => {
    const admin = platform.adminToken;
    const as = (token: string, key: string) => ({ token, headers: { 'idempotency-key': key } });
    // Named in the body: a subscription create.
    const key = randomUUID();
    const body = { merchantId: a.id, memberId: await newMember(a), planId: a.planId };
    const first = await subscribe(a, body, key);
    expect(first.status).toBe(201);
    const again = await api.post('/api/Subscriptions', body, as(admin, key));
    expect([again.status, again.headers.get('idempotent-replayed'), again.body.id], JSON.stringify(again.body)).toEqual([201, 'true', first.body.id]);

    // Named by the path alone: a payment method added to the member (no merchantId in the
    // body), concurrently by the merchant and the admin, is added once; then a pause.
    const memberId = await newMember(a);
    const card = { type: 'Card', brand: 'Visa', last4: '4242', expiryMonth: 12, expiryYear: 2040 };
    const pmKey = randomUUID();
    const added = await Promise.all([a.key, admin, a.key, admin].map((t) => api.post(`/api/members/${memberId}/payment-methods`, card, as(t, pmKey))));
    const ids = new Set(added.filter((r) => r.status === 201).map((r) => r.body.id));
    expect(added.every((r) => r.status === 201 || r.status === 409), JSON.stringify(added.map((r) => r.status))).toBe(true);
    expect(ids.size).toBe(1);
    const methods = await api.get(`/api/members/${memberId}/payment-methods`, { token: a.key });
    expect(methods.body).toHaveLength(1);

    const pauseKey = randomUUID();
    const paused = await api.post(`/api/Subscriptions/${first.body.id}/pause`, {}, as(a.key, pauseKey));
    expect(paused.status).toBe(200);
    const replayed = await api.post(`/api/Subscriptions/${first.body.id}/pause`, {}, as(admin, pauseKey));
    expect([replayed.status, replayed.headers.get('idempotent-replayed')]).toEqual([200, 'true']);
  });
});

describe('durability', () => {
  it('replays after the gateway restarts', async () => {
    const body = { merchantId: a.id, memberId: await newMember(a), planId: a.planId };
    const key = randomUUID();
    const first = await subscribe(a, body, key);
    expect(first.status).toBe(201);
    await platform.processes.gateway!.restart();
    const again = await subscribe(a, body, key);
    expect(again.status).toBe(201);
    expect(again.body).toEqual(first.body);
    expect(again.headers.get('location')).toBe(first.headers.get('location'));
    expect(again.headers.get('idempotent-replayed')).toBe('true');
  });
});

describe('5xx outcomes', () => {
  it('are replayed as problem+json with the original status and "outcome unknown", never re-run', async () => {
    const memberId = await newMember(a);
    const body = { merchantId: a.id, memberId, planId: a.planId };
    const key = randomUUID();
    await platform.processes.billing!.stop();
    let first;
    try {
      first = await subscribe(a, body, key);
    } finally {
      await platform.processes.billing!.start();
    }
    expect(first.status).toBe(503);
    await eventually(async () => (await api.get(`/api/Subscriptions?merchantId=${a.id}`, { token: a.key })).status === 200, 10_000, 200);

    const again = await subscribe(a, body, key);
    expect(again.status).toBe(503);
    expect(again.headers.get('content-type')).toMatch(/^application\/problem\+json/);
    expect(again.headers.get('idempotent-replayed')).toBe('true');
    // interface.md, Errors: "503 | Service degraded; Retry-After is sent", a replayed 503 too
    // (regression: the replay carried none).
    expect(again.headers.get('retry-after')).toBe('1');
    // contract §2: a problem's traceId is the response's own, the one in X-Trace-Id (regression:
    // the replay carried the first attempt's); the first attempt's is kept as originalTraceId.
    expect(again.body.traceId).toBe(again.headers.get('x-trace-id'));
    expect(again.body.traceId).not.toBe(first.body.traceId);
    expect(again.body.originalTraceId).toBe(first.body.traceId);
    // Its instance is the path as sent (it was the lower-cased path the fingerprint uses).
    expect(again.body).toMatchObject({ status: 503, type: expect.stringMatching(/idempotency-outcome-unknown$/), detail: expect.stringMatching(/outcome is unknown/), instance: '/api/Subscriptions' });
    expect(await subscriptionsOf(a, memberId)).toHaveLength(0);

    // A fresh attempt needs a new key.
    expect((await subscribe(a, body, randomUUID())).status).toBe(201);
  });

  it('a claim left in flight by a crashed gateway blocks only for its lease, then reads as outcome unknown', async () => {
    const memberId = await newMember(a);
    const body = { merchantId: a.id, memberId, planId: a.planId };
    const key = randomUUID();
    const billing = platform.processes.billing!;
    const gateway = platform.processes.gateway!;
    // Billing frozen: the request reaches the gateway, claims the key and waits on billing.
    billing.kill('SIGSTOP');
    try {
      const pending = subscribe(a, body, key).catch(() => undefined);
      const claimed = await eventually(async () => {
        const { rows } = await db.query(`select state from gateway.idempotency_records where scope = $1 and key = $2`, [a.id, key]);
        return rows[0]?.state === 'in_flight';
      }, 10_000);
      expect(claimed).toBe(true);
      gateway.kill('SIGKILL');
      await pending;
    } finally {
      billing.kill('SIGCONT');
    }
    await eventually(async () => !gateway.running(), 10_000);
    await gateway.start();

    const during = await subscribe(a, body, key);
    expect(during.status).toBe(409);
    expect(during.body.type).toMatch(/idempotency-in-progress$/);

    const after = await eventually(async () => {
      const res = await subscribe(a, body, key);
      return res.status === 409 ? undefined : res;
    }, (LEASE_SECONDS + 15) * 1000, 500);
    expect(after).toBeDefined();
    expect(after!.status).toBe(500);
    expect(after!.headers.get('content-type')).toMatch(/^application\/problem\+json/);
    expect(after!.headers.get('idempotent-replayed')).toBe('true');
    // Its instance is the path as sent, as for a stored 5xx (it was the lower-cased path the fingerprint uses).
    expect(after!.body).toMatchObject({ type: expect.stringMatching(/idempotency-outcome-unknown$/), detail: expect.stringMatching(/outcome is unknown/), instance: '/api/Subscriptions' });
  }, 120_000);
});

describe('retention', () => {
  it('frees a key after 24 hours: it may then be used for another request', async () => {
    const key = randomUUID();
    expect((await subscribe(a, { merchantId: a.id, memberId: await newMember(a), planId: a.planId }, key)).status).toBe(201);
    // Age the record past its 24 hours, as time would.
    await db.query(`update gateway.idempotency_records set expires_at = now() - interval '1 second', created_at = created_at - interval '24 hours' where scope = $1 and key = $2`, [a.id, key]);
    const reused = await subscribe(a, { merchantId: a.id, memberId: await newMember(a), planId: a.planId }, key);
    expect(reused.status).toBe(201);
    expect(reused.headers.get('idempotent-replayed')).toBeNull();
  });
});
