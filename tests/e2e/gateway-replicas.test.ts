import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startPlatform } from '../../scripts/lib/start-platform.mjs';
import { apiClient, createApiKey, createMerchant, createMerchantUser, eventually, type ApiClient } from '../support/fixtures.js';
import { startGatewayReplica, startTestPlatform, type TestPlatform } from '../support/platform.js';

/**
 * Runs its own platform (identity, billing, gateway) plus a second gateway replica, because it
 * stops services and needs a process handle on each.
 */
let platform: TestPlatform;
let second: Awaited<ReturnType<typeof startPlatform>>;

beforeAll(async () => {
  platform = await startTestPlatform({ services: ['identity', 'billing', 'gateway'] });
  second = await startGatewayReplica(platform);
}, 120_000);

afterAll(async () => {
  await second?.stop();
  await platform?.stop();
});

describe('several gateway replicas', () => {
  it('applies a revocation at the serving replica at once and at another within one second', async () => {
    const a = apiClient(platform.gatewayUrl!);
    const b = apiClient(second.gatewayUrl!);
    const m = await createMerchant(a, platform.adminToken);
    const key = await createApiKey(a, platform.adminToken, m.id);
    // Both replicas have authenticated (and cached) the key.
    expect((await a.get('/api/Merchants/me', { token: key.key })).status).toBe(200);
    expect((await b.get('/api/Merchants/me', { token: key.key })).status).toBe(200);

    expect((await a.del(`/api/ApiKeys/${key.id}`, { token: platform.adminToken })).status).toBe(204);
    expect((await a.get('/api/Merchants/me', { token: key.key })).status).toBe(401);
    await new Promise((r) => setTimeout(r, 1000));
    expect((await b.get('/api/Merchants/me', { token: key.key })).status).toBe(401);
  });
});

describe('a backing service that is down', () => {
  it('answers 503 with Retry-After, then recovers when it is back', async () => {
    const api = apiClient(platform.gatewayUrl!);
    const m = await createMerchant(api, platform.adminToken);
    const key = await createApiKey(api, platform.adminToken, m.id);
    await platform.processes.billing!.stop();
    try {
      const res = await api.get('/api/Merchants/me', { token: key.key });
      expect(res.status).toBe(503);
      expect(res.headers.get('retry-after')).toMatch(/^\d+$/);
      expect(res.headers.get('content-type')).toMatch(/^application\/problem\+json/);
      // Readiness on the public port names the dependency that is down, not its address or error.
      const ready = await api.get('/health/ready');
      expect(ready.status).toBe(503);
      expect(ready.body).toMatchObject({ status: 'not_ready', checks: { billing: 'unavailable', identity: 'ok' } });
      expect(JSON.stringify(ready.body)).not.toMatch(/127\.0\.0\.1|ECONNREFUSED|:\d{4,5}/);
    } finally {
      await platform.processes.billing!.start();
    }
    const back = await eventually(async () => (await api.get('/api/Merchants/me', { token: key.key })).status === 200, 10_000, 200);
    expect(back).toBe(true);
  });
});

/** A client on the platform's own database, for transactions on identity's schema. */
async function dbClient(): Promise<pg.Client> {
  const c = new pg.Client({ connectionString: platform.databaseUrl });
  await c.connect();
  return c;
}

const pause = (ms: number) => new Promise((r) => setTimeout(r, ms));
const refusedEverywhere = (clients: ApiClient[], token: string) =>
  eventually(async () => (await Promise.all(clients.map((c) => c.get('/api/Merchants/me', { token })))).every((r) => r.status === 401), 5000, 100);

describe('revocations that commit out of cursor order', () => {
  it('reach every replica: a change that commits after a higher cursor was read is not skipped', async () => {
    const a = apiClient(platform.gatewayUrl!);
    const b = apiClient(second.gatewayUrl!);
    const m = await createMerchant(a, platform.adminToken);
    const [lowKey, highKey] = [await createApiKey(a, platform.adminToken, m.id), await createApiKey(a, platform.adminToken, m.id)];
    for (const c of [a, b]) for (const k of [lowKey, highKey]) expect((await c.get('/api/Merchants/me', { token: k.key })).status).toBe(200);

    // Two revocations written straight into identity's feed: the first transaction draws the
    // lower cursor but commits last. (The API key rows stay unrevoked, so only the feed, not a
    // cache expiry, can make the gateways refuse the keys.)
    const [first, later] = [await dbClient(), await dbClient()];
    try {
      const insert = `insert into identity.credential_changes (kind, subject_id, revoked) values ('api_key', $1, true) returning cursor`;
      await first.query('begin');
      const low = (await first.query(insert, [lowKey.id])).rows[0].cursor;
      await later.query('begin');
      const high = (await later.query(insert, [highKey.id])).rows[0].cursor;
      expect(BigInt(high)).toBeGreaterThan(BigInt(low));
      await later.query('commit');
      // Several poll intervals pass with the higher cursor committed and the lower one not.
      await pause(1000);
      await first.query('commit');
    } finally {
      await Promise.all([first.end(), later.end()]);
    }
    expect(await refusedEverywhere([a, b], lowKey.key)).toBe(true);
    expect(await refusedEverywhere([a, b], highKey.key)).toBe(true);
  });

  it('a replica that has not read the feed yet answers 503 with Retry-After to API keys and JWTs, then serves them', async () => {
    const a = apiClient(platform.gatewayUrl!);
    const m = await createMerchant(a, platform.adminToken);
    const key = await createApiKey(a, platform.adminToken, m.id);
    const { token: jwt } = await createMerchantUser(a, platform.adminToken, m.id);
    // An open transaction that has written to the feed keeps every read of it waiting, so the
    // new replica starts without a successful sync.
    const writer = await dbClient();
    let third: Awaited<ReturnType<typeof startPlatform>> | undefined;
    try {
      await writer.query('begin');
      await writer.query(`insert into identity.credential_changes (kind, subject_id, revoked) values ('api_key', gen_random_uuid(), true)`);
      third = await startGatewayReplica(platform, {}, { logLevel: 'error' });
      const c = apiClient(third.gatewayUrl!);
      for (const token of [key.key, jwt]) {
        const res = await c.get('/api/Merchants/me', { token });
        expect(res.status).toBe(503);
        expect(res.headers.get('retry-after')).toMatch(/^[1-9]\d*$/);
        expect(res.headers.get('content-type')).toMatch(/^application\/problem\+json/);
      }
      // The platform admin token is not revocable through the feed: served meanwhile.
      expect((await c.get(`/api/admin/merchants/${m.id}`, { token: platform.adminToken })).status).toBe(200);
      await writer.query('rollback');
      expect(await eventually(async () => (await c.get('/api/Merchants/me', { token: key.key })).status === 200, 5000, 100)).toBe(true);
      expect((await c.get('/api/Merchants/me', { token: jwt })).status).toBe(200);
    } finally {
      await writer.end();
      await third?.stop();
    }
  });
});
