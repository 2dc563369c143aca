import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { context, currentTraceId, incomingContext, startTelemetry } from '@billing/telemetry';
import { grpcTestPeers } from '../../../tests/support/grpc-peers.js';
import { addGrpcService, createClient, createGrpcServer, listen, shutdownServer, type ServiceClient, type ServiceImpl } from './grpc.js';
import { configureGrpcTransport } from './grpc-transport.js';
import type { Logger } from './logger.js';

// Regression: the line logged for a handler's unexpected error lacked the caller's traceId (it
// was written from the promise's rejection callback, outside the handler's trace context), so
// the 500 a client saw could not be matched to its cause. Unary and gathered calls alike.

const peers = grpcTestPeers(configureGrpcTransport, 'bp-grpc-unhandled-', ['identity', 'gateway']);

/** The error lines logged: their fields, and the trace the logger's mixin would have stamped on them. */
const errors: { fields: Record<string, unknown>; msg: string; activeTraceId?: string }[] = [];
const logger = {
  error: (fields: Record<string, unknown>, msg: string) => errors.push({ fields, msg, activeTraceId: currentTraceId() }),
  warn: () => undefined,
  info: () => undefined,
  debug: () => undefined,
} as unknown as Logger;

const impl = {
  GetCustomerAccount: async () => {
    await new Promise((r) => setTimeout(r, 5));
    throw new Error('a bug');
  },
} as unknown as ServiceImpl<'identity.v1.Customers'>;

let server: Awaited<ReturnType<typeof createGrpcServer>>['server'];
let unary: ServiceClient<'identity.v1.Customers'>;
let gathered: ServiceClient<'identity.v1.Customers'>;

beforeAll(async () => {
  await startTelemetry('grpc-unhandled-error-test');
  peers.as('identity');
  ({ server } = createGrpcServer({ 'identity.v1.Customers': ['gateway'] }));
  addGrpcService(server, 'identity.v1.Customers', logger, impl);
  const address = `127.0.0.1:${await listen(server, '127.0.0.1:0')}`;
  peers.as('gateway');
  unary = createClient('identity.v1.Customers', address, 5000);
  gathered = createClient('identity.v1.Customers', address, 5000, { gather: true });
});

afterAll(async () => {
  unary?.close();
  gathered?.close();
  if (server) await shutdownServer(server, 1000);
  peers.remove();
});

const inTrace = <T>(traceId: string, fn: () => Promise<T>) => context.with(incomingContext({ traceparent: `00-${traceId}-00f067aa0ba902b7-01` }), fn);

describe('an unexpected error in a gRPC handler', () => {
  it("is logged with the caller's traceId and answered internal", async () => {
    errors.length = 0;
    const traceId = '0af7651916cd43dd8448eb211c80319c';
    const failure = await inTrace(traceId, () => unary.GetCustomerAccount({ id: 'x' })).catch((e: unknown) => e);
    expect(failure).toMatchObject({ code: 'internal' });
    expect(errors).toEqual([expect.objectContaining({ msg: 'unhandled error in gRPC handler', fields: expect.objectContaining({ rpc: 'identity.v1.Customers/GetCustomerAccount', traceId }), activeTraceId: traceId })]);
  });

  it("is logged with each gathered call's own traceId", async () => {
    errors.length = 0;
    const traces = ['4bf92f3577b34da6a3ce929d0e0e4736', '5cf92f3577b34da6a3ce929d0e0e4737'];
    await Promise.allSettled(traces.map((t, i) => inTrace(t, () => gathered.GetCustomerAccount({ id: `g${i}` }))));
    expect(errors.map((e) => e.fields.traceId).sort()).toEqual([...traces].sort());
    expect(errors.map((e) => e.activeTraceId).sort()).toEqual([...traces].sort());
  });
});
