import * as grpc from '@grpc/grpc-js';
import { describe, expect, it } from 'vitest';
import { DEADLINE_EXCEEDED_DETAIL, fromGrpcError } from './grpc.js';

const transportError = (code: grpc.status): grpc.ServiceError =>
  Object.assign(new Error('transport'), { code, details: 'transport', metadata: new grpc.Metadata() });

// Regression: a call that reached billing and timed out (billing slow, the subscription created
// after the gateway gave up) answered "A backing service is unavailable; retry shortly.", and a
// client that retried with a new key (or without one) made the change twice.
describe('transport failures as the caller sees them', () => {
  it('a service that cannot be reached: 503, retry shortly (nothing was sent)', () => {
    const e = fromGrpcError(transportError(grpc.status.UNAVAILABLE));
    expect(e).toMatchObject({ code: 'service_unavailable', extensions: { retryAfterSeconds: 1 } });
    expect(e.message).toContain('retry shortly');
  });

  it('a call without an answer within its deadline: 503 saying the change may have been made', () => {
    const e = fromGrpcError(transportError(grpc.status.DEADLINE_EXCEEDED));
    expect(e).toMatchObject({ code: 'service_unavailable', message: DEADLINE_EXCEEDED_DETAIL, extensions: { retryAfterSeconds: 1 } });
    expect(e.message).toContain('may or may not have been made');
    expect(e.message).not.toContain('retry shortly');
  });
});
