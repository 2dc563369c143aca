import { describe, expect, it } from 'vitest';
import { isLoopbackAddress } from './grpc-transport.js';

describe('loopback addresses (where production allows plaintext gRPC)', () => {
  it.each(['127.0.0.1:50051', 'localhost:50051', '[::1]:50051', '127.1.2.3:1', 'dns:///127.0.0.1:50051'])('%s is loopback', (a) => {
    expect(isLoopbackAddress(a)).toBe(true);
  });
  it.each(['0.0.0.0:50051', '[::]:50051', 'identity:50051', '10.0.0.5:50051', '[::ffff:127.0.0.1]:50051'])('%s is not', (a) => {
    expect(isLoopbackAddress(a)).toBe(false);
  });
});
