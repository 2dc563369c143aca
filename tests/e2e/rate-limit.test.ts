import { randomBytes } from 'node:crypto';
import { jetstreamManager } from '@nats-io/jetstream';
import { connect } from '@nats-io/transport-node';
import { natsServerOptions } from '@billing/service-runtime';
import { afterAll, beforeAll, describe, expect, inject, it } from 'vitest';
import { besideSharedPlatform } from '../support/e2e.js';
import { startPlatform } from '../../scripts/lib/start-platform.mjs';
import { apiClient, unique, type ApiClient, type ApiResponse } from '../support/fixtures.js';

/**
 * Two gateway replicas with a low limit (2 requests/s, burst 10) in front of one identity,
 * sharing their buckets through a NATS KV bucket of their own; and a third replica whose NATS
 * is unreachable, to show it still limits on its own and never fails a request.
 */
const LIMIT = { RATE_LIMIT_PER_SECOND: '2', RATE_LIMIT_BURST: '10', RATE_LIMIT_SYNC_MS: '100', RATE_LIMIT_KV_BUCKET: `rl_test_${randomBytes(4).toString('hex')}` };
const BURST = 10;

let first: Awaited<ReturnType<typeof startPlatform>>;
let second: Awaited<ReturnType<typeof startPlatform>>;
let isolated: Awaited<ReturnType<typeof startPlatform>>;
let a: ApiClient;
let b: ApiClient;
let c: ApiClient;

beforeAll(async () => {
  const common = besideSharedPlatform();
  first = await startPlatform({ ...common, services: ['identity', 'gateway'], serviceEnv: { gateway: LIMIT } });
  const identity = first.processes.identity!.address;
  [second, isolated] = await Promise.all([
    startPlatform({ ...common, services: ['gateway'], serviceEnv: { gateway: { ...LIMIT, IDENTITY_GRPC_URL: identity } } }),
    // Port 9 (discard) has no NATS server: the shared store is unreachable for this replica.
    startPlatform({ ...common, services: ['gateway'], serviceEnv: { gateway: { ...LIMIT, IDENTITY_GRPC_URL: identity, NATS_URL: 'nats://127.0.0.1:9' } } }),
  ]);
  a = apiClient(first.gatewayUrl!);
  b = apiClient(second.gatewayUrl!);
  c = apiClient(isolated.gatewayUrl!);
}, 120_000);

afterAll(async () => {
  await Promise.all([second?.stop(), isolated?.stop()]);
  await first?.stop();
});

const pause = (ms: number) => new Promise((r) => setTimeout(r, ms));

async function sequentially(n: number, send: () => Promise<ApiResponse>): Promise<ApiResponse[]> {
  const out: ApiResponse[] = [];
  for (let i = 0; i < n; i++) out.push(await send());
  return out;
}

const admitted = (responses: ApiResponse[]) => responses.filter((r) => r.status !== 429).length;

/** Signs up through the shared platform's gateway, so sign-ups do not use the test replicas' per-IP budget (same database, same signing key). */
async function customerToken(): Promise<string> {
  const res = await apiClient(inject('gatewayUrl')).post('/api/account/signup', { email: `${unique('rl')}@example.com`, password: 'correct-horse-42', firstName: 'R', lastName: 'L', dateOfBirth: '1990-01-01' });
  if (res.status !== 200) throw new Error(`signup: ${res.status} ${JSON.stringify(res.body)}`);
  return res.body.token;
}

describe('rate limits', () => {
  it('answer 429 as problem details with a whole-seconds Retry-After once a credential exceeds its burst', async () => {
    const token = await customerToken();
    const responses = await sequentially(BURST + 5, () => a.get('/api/account/me', { token }));
    expect(responses.slice(0, BURST).every((r) => r.status === 200)).toBe(true);
    const limited = responses.filter((r) => r.status === 429);
    expect(limited.length).toBeGreaterThanOrEqual(3);
    for (const r of limited) {
      expect(r.headers.get('content-type')).toMatch(/^application\/problem\+json/);
      expect(r.body).toMatchObject({ status: 429, type: expect.stringMatching(/\/rate-limited$/) });
      expect(r.headers.get('retry-after')).toMatch(/^[1-9]\d*$/);
    }
  });

  it('are per credential: another customer is not limited by the first', async () => {
    const [one, two] = [await customerToken(), await customerToken()];
    await sequentially(BURST + 3, () => a.get('/api/account/me', { token: one }));
    expect((await a.get('/api/account/me', { token: one })).status).toBe(429);
    expect((await a.get('/api/account/me', { token: two })).status).toBe(200);
  });

  /** A fresh credential's burst at A, then at B: what B admits shows whether A's use reached it. */
  async function sharedBetweenReplicas() {
    const token = await customerToken();
    const atA = await sequentially(BURST, () => a.get('/api/account/me', { token }));
    expect(admitted(atA)).toBe(BURST);
    await pause(400); // several sync intervals: replica A has added its consumption to the shared bucket
    const atB = await sequentially(BURST, () => b.get('/api/account/me', { token }));
    // Alone, replica B would admit its own full burst (10); sharing, it admits only what refilled
    // meanwhile plus what it admits before its first reconciliation.
    expect(admitted(atB)).toBeLessThanOrEqual(4);
    expect(admitted(atA) + admitted(atB)).toBeLessThan(1.5 * BURST);
    expect(atB.at(-1)!.status).toBe(429);
  }

  it('hold across two gateway replicas for a credential', sharedBetweenReplicas);

  it('are shared again after NATS lost their bucket (a restarted server keeps no memory stream; they stayed per replica until the gateway restarted)', async () => {
    const nc = await connect(natsServerOptions(inject('natsUrl')));
    try {
      await (await jetstreamManager(nc)).streams.delete(`KV_${LIMIT.RATE_LIMIT_KV_BUCKET}`);
    } finally {
      await nc.close();
    }
    // The first requests after the loss find the bucket gone (limited per replica meanwhile); the replicas make it again.
    const token = await customerToken();
    await sequentially(3, () => a.get('/api/account/me', { token }));
    await sequentially(3, () => b.get('/api/account/me', { token }));
    await pause(1_500);
    await sharedBetweenReplicas();
  });

  it('hold across replicas for anonymous requests from one client IP, alternating replicas', async () => {
    // Anonymous requests share the per-IP bucket; an invalid login body is refused (400) after the limiter, before any backend.
    const responses: ApiResponse[] = [];
    for (let i = 0; i < 4 * BURST; i++) responses.push(await (i % 2 ? b : a).post('/api/account/login', {}));
    expect(responses.every((r) => r.status === 400 || r.status === 429)).toBe(true);
    // Two independent replicas would admit two bursts (20) plus refill; shared, one burst plus refill and sync lag.
    expect(admitted(responses)).toBeLessThan(1.5 * BURST);
  });

  it('fall back to limiting per replica, never failing a request, when the shared store is unreachable', async () => {
    const token = await customerToken();
    const responses = await sequentially(BURST + 5, () => c.get('/api/account/me', { token }));
    expect(responses.map((r) => r.status).filter((s) => s !== 200 && s !== 429)).toEqual([]);
    expect(admitted(responses)).toBeGreaterThanOrEqual(BURST);
    expect(responses.at(-1)!.status).toBe(429);
  });
});
