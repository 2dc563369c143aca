import { afterAll, beforeAll, expect, it } from 'vitest';
import { grpcTestPeers } from '../../../tests/support/grpc-peers.js';
import { addGrpcService, createClient, createGrpcServer, listen, shutdownServer, type ServiceClient, type ServiceImpl } from './grpc.js';
import { configureGrpcTransport } from './grpc-transport.js';
import type { Logger } from './logger.js';

// GRPC_MAX_MESSAGE_BYTES was 4 MiB fixed in code; the server and the client take it from the config,
// and a message over it is the caller's 413 (payload_too_large), not an internal error (500).
const logger = { error: () => undefined, warn: () => undefined, info: () => undefined, debug: () => undefined } as unknown as Logger;
const impl = {
  GetCustomerAccount: async (req: { customerId: string }) => ({ id: req.customerId, email: 'x'.repeat(200_000) }),
} as unknown as ServiceImpl<'identity.v1.Customers'>;

const peers = grpcTestPeers(configureGrpcTransport, 'bp-grpc-limit-', ['identity', 'gateway'], { GRPC_MAX_MESSAGE_BYTES: 100_000 });

let server: ReturnType<typeof createGrpcServer>['server'];
let client: ServiceClient<'identity.v1.Customers'>;

beforeAll(async () => {
  peers.as('identity');
  ({ server } = createGrpcServer({ 'identity.v1.Customers': ['gateway'] }));
  addGrpcService(server, 'identity.v1.Customers', logger, impl);
  const address = `127.0.0.1:${await listen(server, '127.0.0.1:0')}`;
  peers.as('gateway');
  client = createClient('identity.v1.Customers', address, 5000);
});

afterAll(async () => {
  client?.close();
  if (server) await shutdownServer(server, 1000);
  configureGrpcTransport({ PLATFORM_MODE: 'test' });
  peers.remove();
});

it('the server refuses a request larger than GRPC_MAX_MESSAGE_BYTES', async () => {
  await expect(client.GetCustomerAccount({ customerId: 'c'.repeat(150_000) } as never)).rejects.toMatchObject({ code: 'payload_too_large', message: expect.stringContaining('GRPC_MAX_MESSAGE_BYTES') });
});

it('the client refuses a response larger than GRPC_MAX_MESSAGE_BYTES', async () => {
  await expect(client.GetCustomerAccount({ customerId: 'c1' } as never)).rejects.toMatchObject({ code: 'payload_too_large', message: expect.stringContaining('GRPC_MAX_MESSAGE_BYTES') });
});
