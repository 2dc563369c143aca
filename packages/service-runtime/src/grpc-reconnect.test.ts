import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, expect, it } from 'vitest';
// @ts-expect-error: the launcher's certificate tool is plain JavaScript without declarations.
import { ensureGrpcCertificates } from '../../../scripts/lib/grpc-certs.mjs';
import { addGrpcService, createClient, createGrpcServer, listen, shutdownServer, type ServiceImpl } from './grpc.js';
import { configureGrpcTransport } from './grpc-transport.js';
import { createLogger } from './logger.js';

// A client whose server went away and came back reaches it again within the configured
// reconnect backoff. With grpc-js's own backoff (1 s growing by 1.6 per failed attempt, up to
// 120 s) the next attempt after 6 s of failures comes 2.5–4 s after the first (at 5.2 s and
// 9.3 s, ±20%), so a server back at 6 s stayed unreachable for seconds: a restarted identity
// left the gateway answering 503.

const impl = {
  GetCustomerAccount: async (req: { id: string }) => ({ id: req.id, email: 'a@x.io', firstName: 'A', lastName: 'B', fullName: 'A B', emailVerified: false, createdAt: '2026-01-01T00:00:00.000Z', claimed: true, suspended: false }),
} as unknown as ServiceImpl<'identity.v1.Customers'>;
const dir = mkdtempSync(join(tmpdir(), 'bp-reconnect-'));
ensureGrpcCertificates(dir, ['identity', 'gateway']);
/** The process's transport as `peer`; a client made now keeps it (and its reconnect backoff). */
const as = (peer: string) =>
  configureGrpcTransport({ PLATFORM_MODE: 'test', GRPC_TLS_CA: join(dir, 'ca.crt'), GRPC_TLS_CERT: join(dir, `${peer}.crt`), GRPC_TLS_KEY: join(dir, `${peer}.key`), GRPC_RECONNECT_BACKOFF_MAX_MS: 200 });
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));
const servers: Awaited<ReturnType<typeof createGrpcServer>>['server'][] = [];

async function serve(address: string): Promise<string> {
  as('identity');
  const { server } = createGrpcServer({ 'identity.v1.Customers': ['gateway'] });
  addGrpcService(server, 'identity.v1.Customers', createLogger('reconnect-test', 'silent'), impl);
  servers.push(server);
  return `127.0.0.1:${await listen(server, address)}`;
}

afterAll(async () => {
  for (const s of servers) await shutdownServer(s, 100);
  configureGrpcTransport({ PLATFORM_MODE: 'test' });
  rmSync(dir, { recursive: true, force: true });
});

it('reaches a restarted server again within GRPC_RECONNECT_BACKOFF_MAX_MS', { timeout: 30_000 }, async () => {
  const address = await serve('127.0.0.1:0');
  as('gateway');
  const client = createClient('identity.v1.Customers', address, 1000);
  try {
    const call = () => client.GetCustomerAccount({ id: 'c1' }).then(() => 'ok', (e: { code?: string }) => e.code ?? 'error');
    expect(await call()).toBe('ok');
    await shutdownServer(servers.pop()!, 100);
    const downSince = Date.now();
    const failures = new Set<string>();
    while (Date.now() - downSince < 6000) {
      failures.add(await call());
      await sleep(100);
    }
    expect([...failures]).toEqual(['service_unavailable']);
    await serve(address);
    const back = Date.now();
    while ((await call()) !== 'ok' && Date.now() - back < 10_000) await sleep(50);
    // 200 ms of backoff at most (+20% jitter) and one connection; 1.5 s leaves room for a busy machine.
    expect(Date.now() - back).toBeLessThan(1500);
  } finally {
    client.close();
  }
});
