import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { DomainError } from '@billing/contracts';
import { context, currentTraceId, incomingContext, startTelemetry } from '@billing/telemetry';
// @ts-expect-error: the launcher's certificate tool is plain JavaScript without declarations.
import { ensureGrpcCertificates } from '../../../scripts/lib/grpc-certs.mjs';
import { addGrpcService, createClient, createGrpcServer, listen, shutdownServer, type ServiceClient, type ServiceImpl } from './grpc.js';
import { configureGrpcTransport } from './grpc-transport.js';
import { createLogger } from './logger.js';

// Gathered calls (common.v1.Gathered) between real processes' transport: a server with
// identity's certificate and a fake identity.v1.Customers, called over mTLS by clients holding
// the gateway's and checkout's certificates, with spans not recorded (as the services run
// unless tracing is configured).

const dir = mkdtempSync(join(tmpdir(), 'bp-gathered-'));
const as = (peer: string) => configureGrpcTransport({ PLATFORM_MODE: 'test', GRPC_TLS_CA: join(dir, 'ca.crt'), GRPC_TLS_CERT: join(dir, `${peer}.crt`), GRPC_TLS_KEY: join(dir, `${peer}.key`) });

/** What the fake's GetCustomerAccount saw of each call: whether it came gathered, and its trace. */
const seen: { id: string; gathered: boolean; traceId?: string }[] = [];
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

const impl = {
  GetCustomerAccount: async (req: { id: string }, call: unknown) => {
    seen.push({ id: req.id, gathered: call === undefined, traceId: currentTraceId() });
    if (req.id === 'missing') throw new DomainError('not_found', 'Customer account not found.', { outcome: 'Missing' });
    if (req.id === 'broken') throw new Error('a bug');
    if (req.id.startsWith('slow')) await sleep(400);
    return { id: req.id, email: `${req.id}@x.io`, firstName: 'A', lastName: 'B', fullName: 'A B', emailVerified: false, createdAt: '2026-01-01T00:00:00.000Z', claimed: true, suspended: false };
  },
  EnsureCustomerAccount: async (req: { email: string }) => ({ id: req.email, created: true, claimed: false }),
  // An empty reply message (zero bytes on the wire).
  VerifyEmail: async (req: { token: string }, call: unknown) => {
    seen.push({ id: `verify-${req.token}`, gathered: call === undefined, traceId: currentTraceId() });
    return {};
  },
} as unknown as ServiceImpl<'identity.v1.Customers'>;

let server: Awaited<ReturnType<typeof createGrpcServer>>['server'];
let address = '';
let gateway: ServiceClient<'identity.v1.Customers'>;
let checkout: ServiceClient<'identity.v1.Customers'>;

beforeAll(async () => {
  await startTelemetry('gathered-calls-test');
  ensureGrpcCertificates(dir, ['identity', 'gateway', 'checkout']);
  as('identity');
  ({ server } = createGrpcServer({ 'identity.v1.Customers': ['gateway'], 'identity.v1.Customers/GetCustomerAccount': ['gateway', 'checkout'] }));
  addGrpcService(server, 'identity.v1.Customers', createLogger('gathered-calls-test', 'silent'), impl);
  address = `127.0.0.1:${await listen(server, '127.0.0.1:0')}`;
  as('gateway');
  gateway = createClient('identity.v1.Customers', address, 5000, { gather: true });
  as('checkout');
  checkout = createClient('identity.v1.Customers', address, 5000, { gather: true });
});

afterAll(async () => {
  gateway?.close();
  checkout?.close();
  if (server) await shutdownServer(server, 1000);
  rmSync(dir, { recursive: true, force: true });
});

const get = (client: ServiceClient<'identity.v1.Customers'>, id: string) => client.GetCustomerAccount({ id });
/** Asserts the handler ran each of `ids` as part of a gathered call (not as a unary call). */
const expectGathered = (ids: string[]) => expect(ids.map((id) => seen.find((s) => s.id === id)?.gathered)).toEqual(ids.map(() => true));

describe('gathered gRPC calls', () => {
  it('sends the calls of one turn together, answering each its own reply', async () => {
    seen.length = 0;
    const replies = await Promise.all(['a', 'b', 'c'].map((id) => get(gateway, id)));
    expect(replies.map((r) => [r.id, r.email])).toEqual([['a', 'a@x.io'], ['b', 'b@x.io'], ['c', 'c@x.io']]);
    expect(seen.map((s) => s.gathered)).toEqual([true, true, true]);
  });

  it('keeps each gathered message under half the message limit: a large call beside small ones fails none of them', async () => {
    seen.length = 0;
    // GRPC_MAX_MESSAGE_BYTES is 4 MiB here: ten calls of 500 KB, and one of 1.5 MB, gathered in one
    // turn, would be one message of 6.5 MB that the server refuses for all of them.
    const ids = [...Array.from({ length: 10 }, (_, i) => `${i}`.padEnd(500_000, 'x')), 'big'.padEnd(1_500_000, 'y'), 'small-1', 'small-2'];
    const replies = await Promise.all(ids.map((id) => get(gateway, id)));
    expect(replies.map((r) => r.id)).toEqual(ids);
    expect(seen.filter((s) => s.gathered).length).toBeGreaterThanOrEqual(10);
  });

  it('makes a call alone in its turn as its own unary call', async () => {
    seen.length = 0;
    expect((await get(gateway, 'alone')).id).toBe('alone');
    expect(seen).toEqual([expect.objectContaining({ id: 'alone', gathered: false })]);
  });

  it("refuses one call with its own error, its neighbours answered, and hides a handler's bug as internal", async () => {
    seen.length = 0;
    const [ok, missing, broken] = await Promise.allSettled([get(gateway, 'ok'), get(gateway, 'missing'), get(gateway, 'broken')]);
    expect(ok).toMatchObject({ status: 'fulfilled', value: { id: 'ok' } });
    expect((missing as PromiseRejectedResult).reason).toBeInstanceOf(DomainError);
    expect((missing as PromiseRejectedResult).reason).toMatchObject({ code: 'not_found', message: 'Customer account not found.', extensions: { outcome: 'Missing' } });
    expect((broken as PromiseRejectedResult).reason).toMatchObject({ code: 'internal' });
    expect(String((broken as PromiseRejectedResult).reason.message)).not.toContain('a bug');
    expectGathered(['ok', 'missing', 'broken']);
  });

  it('answers a fast call without waiting for a slow one gathered with it', async () => {
    seen.length = 0;
    const order: string[] = [];
    await Promise.all(['slow-1', 'fast'].map((id) => get(gateway, id).then(() => order.push(id))));
    expect(order).toEqual(['fast', 'slow-1']);
    expectGathered(['slow-1', 'fast']);
  });

  it("checks each call against its own method's callers", async () => {
    // Checkout may read an account but not ensure one; both in one gathered call.
    seen.length = 0;
    const [read, ensure] = await Promise.allSettled([get(checkout, 'mine'), checkout.EnsureCustomerAccount({ email: 'e@x.io', firstName: 'A', lastName: 'B' })]);
    expect(read).toMatchObject({ status: 'fulfilled', value: { id: 'mine' } });
    expect((ensure as PromiseRejectedResult).reason).toMatchObject({ code: 'forbidden' });
    expectGathered(['mine']);
    expect(await gateway.EnsureCustomerAccount({ email: 'e@x.io', firstName: 'A', lastName: 'B' })).toEqual({ id: 'e@x.io', created: true, claimed: false });
  });

  it('answers an empty reply message (zero bytes) as the reply, not as a refusal', async () => {
    seen.length = 0;
    expect(await Promise.all([gateway.VerifyEmail({ token: 'a' }), gateway.VerifyEmail({ token: 'b' })])).toEqual([{}, {}]);
    expectGathered(['verify-a', 'verify-b']);
  });

  it("runs each call in its caller's trace", async () => {
    seen.length = 0;
    const traces = ['0af7651916cd43dd8448eb211c80319c', '4bf92f3577b34da6a3ce929d0e0e4736'];
    await Promise.all(traces.map((t, i) => context.with(incomingContext({ traceparent: `00-${t}-00f067aa0ba902b7-01` }), () => get(gateway, `traced-${i}`))));
    expect(seen.map((s) => [s.id, s.gathered, s.traceId])).toEqual([
      ['traced-0', true, traces[0]],
      ['traced-1', true, traces[1]],
    ]);
  });

  it('fails every call of a gathered call the server never answered as service_unavailable', async () => {
    as('gateway');
    const nowhere = createClient('identity.v1.Customers', '127.0.0.1:1', 2000, { gather: true });
    try {
      const settled = await Promise.allSettled([get(nowhere, 'a'), get(nowhere, 'b')]);
      expect(settled.map((s) => s.status === 'rejected' && (s.reason as DomainError).code)).toEqual(['service_unavailable', 'service_unavailable']);
    } finally {
      nowhere.close();
    }
  });
});
