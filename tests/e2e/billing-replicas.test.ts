import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startPlatform } from '../../scripts/lib/start-platform.mjs';
import { addPaymentMethod, CARD, createMember, idempotent, setUpMerchant, type TestMerchant } from '../support/billing-fixtures.js';
import { apiClient, type ApiClient } from '../support/fixtures.js';
import { startTestPlatform, type TestPlatform } from '../support/platform.js';

/**
 * Two billing replicas as two processes on one database: billing runs started on both at the
 * same moment charge each due period exactly once, counted in the sandbox provider's own ledger.
 * Runs its own platform plus a second billing process (with a gateway in front of it), because
 * its runs charge every due subscription of the database.
 */
let platform: TestPlatform;
let second: Awaited<ReturnType<typeof startPlatform>>;
let a: ApiClient;
let b: ApiClient;
let sandbox: string;
let db: pg.Client;

// Small chunks and workers: each run makes many claims, so the two replicas' claims interleave.
const RUN_ENV = { BILLING_RUN_CHUNK_SIZE: '3', BILLING_RUN_WORKERS: '2', BILLING_RUN_CONCURRENCY: '2', BILLING_RUN_INTERVAL_MS: '0' };

beforeAll(async () => {
  platform = await startTestPlatform({ services: ['sandbox-provider', 'identity', 'billing', 'gateway'], serviceEnv: { billing: RUN_ENV } });
  sandbox = platform.processes['sandbox-provider']!.address;
  second = await startPlatform({
    databaseUrl: platform.databaseUrl,
    natsUrl: platform.natsUrl,
    mode: 'test',
    logLevel: 'warn',
    adminToken: platform.adminToken,
    services: ['billing', 'gateway'],
    serviceEnv: {
      billing: { ...RUN_ENV, PAYMENT_PROVIDER_URL: sandbox },
      gateway: { IDENTITY_GRPC_URL: platform.processes.identity!.address },
    },
  });
  a = apiClient(platform.gatewayUrl!);
  b = apiClient(second.gatewayUrl!);
  db = new pg.Client({ connectionString: platform.databaseUrl });
  await db.connect();
}, 120_000);

afterAll(async () => {
  await db?.end();
  await second?.stop();
  await platform?.stop();
});

const T0 = '2030-01-15T00:00:00.000Z';

interface Ledger {
  charges: { id: string; amountMinor: number; status: string; idempotencyKey: string; paymentMethod: { last4: string } }[];
}

async function ledger(merchantId: string): Promise<Ledger> {
  return (await (await fetch(`${sandbox}/__sandbox/ledger?account=${merchantId}`)).json()) as Ledger;
}

async function fault(merchantId: string, change: Record<string, unknown> | null) {
  if (change) await fetch(`${sandbox}/__sandbox/faults`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ ...change, account: merchantId }) });
  else await fetch(`${sandbox}/__sandbox/faults?account=${merchantId}`, { method: 'DELETE' });
}

async function runOn(api: ApiClient, asOf: string) {
  const res = await api.post('/api/admin/billing-runs', { asOf }, { token: platform.adminToken });
  expect(res.status, JSON.stringify(res.body)).toBe(200);
  return res.body as { charged: number; succeeded: number; failed: number };
}

async function subscriber(m: TestMerchant, cards: Record<string, unknown>[]) {
  const member = await createMember(a, m);
  for (const card of cards) await addPaymentMethod(a, m, member.id, card);
  const res = await a.post('/api/Subscriptions', { merchantId: m.id, memberId: member.id, planId: m.planId, startDate: T0 }, { token: m.key, headers: idempotent() });
  expect(res.status, JSON.stringify(res.body)).toBe(201);
  return res.body as { id: string };
}

describe('two billing replicas', () => {
  it('charge each due period exactly once when both run at the same moment, to the cent', async () => {
    const m = await setUpMerchant(a, platform.adminToken);
    expect((await a.put(`/api/admin/merchants/${m.id}/provider`, { providerEnvironment: 'Staging', gatewayUsername: 'gw', gatewayPassword: 'gw-secret' }, { token: platform.adminToken })).status).toBe(200);
    // 24 members with one good card, 6 whose first card declines (the second method is charged).
    const subs = await Promise.all([
      ...Array.from({ length: 24 }, () => subscriber(m, [CARD])),
      ...Array.from({ length: 6 }, () => subscriber(m, [{ ...CARD, last4: '0002' }, CARD])),
    ]);
    // Slow calls keep both runs busy at once, so they contend for the same due subscriptions.
    await fault(m.id, { latencyMs: 40 });
    const [ra, rb] = await Promise.all([runOn(a, T0), runOn(b, T0)]);
    await fault(m.id, null);

    expect(ra.succeeded + rb.succeeded).toBe(subs.length);
    // Both processes charged: the runs really did overlap.
    expect(ra.succeeded).toBeGreaterThan(0);
    expect(rb.succeeded).toBeGreaterThan(0);

    const l = await ledger(m.id);
    const settled = l.charges.filter((c) => c.status === 'Settled');
    const declined = l.charges.filter((c) => c.status === 'Failed');
    expect(settled).toHaveLength(subs.length);
    expect(declined).toHaveLength(6);
    expect(new Set(l.charges.map((c) => c.idempotencyKey)).size).toBe(l.charges.length);
    expect(settled.reduce((n, c) => n + c.amountMinor, 0)).toBe(subs.length * 1995);

    // Each ledger entry is one billing transaction (its id is the key), and each subscription has one Settled charge for the period.
    const rows = (
      await db.query(`select id, subscription_id, status, amount_minor from billing.transactions where merchant_id = $1 and kind = 'Charge'`, [m.id])
    ).rows as { id: string; subscription_id: string; status: string; amount_minor: string }[];
    expect(rows.map((r) => r.id).sort()).toEqual(l.charges.map((c) => c.idempotencyKey).sort());
    const settledPerSub = new Map<string, number>();
    for (const r of rows.filter((r) => r.status === 'Settled')) settledPerSub.set(r.subscription_id, (settledPerSub.get(r.subscription_id) ?? 0) + 1);
    expect([...settledPerSub.keys()].sort()).toEqual(subs.map((s) => s.id).sort());
    expect([...settledPerSub.values()].every((n) => n === 1)).toBe(true);
    expect(rows.filter((r) => r.status === 'Settled').reduce((n, r) => n + Number(r.amount_minor), 0)).toBe(subs.length * 1995);

    // Again on both at once: nothing is due any more.
    const again = await Promise.all([runOn(a, T0), runOn(b, T0)]);
    expect(again.map((r) => r.charged)).toEqual([0, 0]);
    expect((await ledger(m.id)).charges).toHaveLength(l.charges.length);
  }, 60_000);
});
