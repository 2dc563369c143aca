import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import * as grpc from '@grpc/grpc-js';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
// @ts-expect-error: the launcher's certificate tool is plain JavaScript without declarations.
import { ensureGrpcCertificates } from '../../../scripts/lib/grpc-certs.mjs';
import { callerOf, tlsConnectionOf } from './grpc-transport.js';

/** A unary method whose messages are raw bytes, answering with what `handle` returns. */
const bytes = { serialize: (b: Buffer) => b, deserialize: (b: Buffer) => b };
const WHO: grpc.ServiceDefinition = {
  Who: { path: '/test.Caller/Who', requestStream: false, responseStream: false, requestSerialize: bytes.serialize, requestDeserialize: bytes.deserialize, responseSerialize: bytes.serialize, responseDeserialize: bytes.deserialize },
};
const Client = grpc.makeGenericClientConstructor(WHO, 'Caller');

describe('callerOf: the caller named by the verified client certificate, kept per connection', () => {
  const dir = mkdtempSync(join(tmpdir(), 'bp-grpc-caller-'));
  const pem = (f: string) => readFileSync(join(dir, f));
  const server = new grpc.Server();
  const seen: { caller?: string; onConnection: boolean }[] = [];
  let port = 0;
  const clients: grpc.Client[] = [];

  beforeAll(async () => {
    ensureGrpcCertificates(dir, ['identity', 'billing', 'webhooks']);
    server.addService(WHO, {
      Who: (call: grpc.ServerUnaryCall<Buffer, Buffer>, cb: grpc.sendUnaryData<Buffer>) => {
        const caller = callerOf(call);
        seen.push({ caller, onConnection: tlsConnectionOf(call) !== undefined });
        cb(null, Buffer.from(caller ?? ''));
      },
    });
    const creds = grpc.ServerCredentials.createSsl(pem('ca.crt'), [{ cert_chain: pem('identity.crt'), private_key: pem('identity.key') }], true);
    port = await new Promise<number>((resolve, reject) => server.bindAsync('127.0.0.1:0', creds, (e, p) => (e ? reject(e) : resolve(p))));
  });
  afterAll(() => {
    clients.forEach((c) => c.close());
    server.forceShutdown();
    rmSync(dir, { recursive: true, force: true });
  });

  const as = (peer: string) => {
    const c = new Client(`127.0.0.1:${port}`, grpc.credentials.createSsl(pem('ca.crt'), pem(`${peer}.key`), pem(`${peer}.crt`)), { 'grpc.ssl_target_name_override': 'identity' });
    clients.push(c);
    return (): Promise<string> =>
      new Promise((resolve, reject) => (c as any).Who(Buffer.alloc(0), (e: Error | null, r: Buffer) => (e ? reject(e) : resolve(r.toString()))));
  };

  it('names each connection by its own certificate, on every call', async () => {
    const billing = as('billing');
    const webhooks = as('webhooks');
    expect([await billing(), await webhooks(), await billing(), await webhooks()]).toEqual(['billing', 'webhooks', 'billing', 'webhooks']);
  });

  // The cache needs the connection; if grpc-js moves its internals this fails (the answers stay
  // right, through the per-call auth context, but each call parses the certificate again).
  it('finds the TLS connection of each call', () => {
    expect(seen.length).toBeGreaterThan(0);
    expect(seen.every((s) => s.onConnection)).toBe(true);
  });
});
