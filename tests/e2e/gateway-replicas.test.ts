import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startPlatform } from '../../scripts/lib/start-platform.mjs';
import { apiClient, createApiKey, createMerchant, eventually } from '../support/fixtures.js';
import { startTestPlatform, type TestPlatform } from '../support/platform.js';

/**
 * Runs its own platform (identity, billing, gateway) plus a second gateway replica, because it
 * stops services and needs a process handle on each.
 */
let platform: TestPlatform;
let second: Awaited<ReturnType<typeof startPlatform>>;

beforeAll(async () => {
  platform = await startTestPlatform({ services: ['identity', 'billing', 'gateway'] });
  second = await startPlatform({
    databaseUrl: platform.databaseUrl,
    natsUrl: platform.natsUrl,
    mode: 'test',
    logLevel: 'warn',
    adminToken: platform.adminToken,
    services: ['gateway'],
    serviceEnv: { gateway: { IDENTITY_GRPC_URL: platform.processes.identity!.address, BILLING_GRPC_URL: platform.processes.billing!.address } },
  });
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
    } finally {
      await platform.processes.billing!.start();
    }
    const back = await eventually(async () => (await api.get('/api/Merchants/me', { token: key.key })).status === 200, 10_000, 200);
    expect(back).toBe(true);
  });
});
