import { createRequire } from 'node:module';
import { dirname, join } from 'node:path';
import { connect, type NatsConnection } from '@nats-io/transport-node';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startTestNats, type TestNats } from '../../../tests/support/nats.js';
import { natsServerOptions, skipErrorOfAnsweredRequests } from './nats.js';

// nats.js's request module reads `RequestError` from its errors module at each use: counting
// constructions there counts what a request builds.
const require = createRequire(import.meta.url);
const errorsModule = require(join(dirname(require.resolve('@nats-io/nats-core')), 'errors.js')) as { RequestError: new (message?: string) => Error };
const RealRequestError = errorsModule.RequestError;
let built = 0;

let nats: TestNats;
let nc: NatsConnection;

beforeAll(async () => {
  skipErrorOfAnsweredRequests();
  errorsModule.RequestError = class CountedRequestError extends RealRequestError {
    constructor(message?: string) {
      super(message);
      built++;
    }
  };
  nats = await startTestNats();
  nc = await connect({ ...natsServerOptions(nats.url), noAsyncTraces: true });
  nc.subscribe('echo', { callback: (_err, msg) => msg.respond(msg.data) });
  await nc.flush();
}, 60_000);

afterAll(async () => {
  errorsModule.RequestError = RealRequestError;
  await nc?.close();
  await nats?.stop();
});

describe('NATS requests (skipErrorOfAnsweredRequests)', () => {
  it('builds no error for a request that was answered', async () => {
    built = 0;
    const answers = await Promise.all(Array.from({ length: 50 }, (_, i) => nc.request('echo', `hello ${i}`, { timeout: 5_000 })));
    expect(answers.map((m) => m.string())).toEqual(Array.from({ length: 50 }, (_, i) => `hello ${i}`));
    expect(built).toBe(0);
  });

  it('still fails a request nobody answers, and one that times out', async () => {
    await expect(nc.request('nobody.listens', 'x', { timeout: 2_000 })).rejects.toThrow(/no responders/i);
    nc.subscribe('silent', { callback: () => undefined });
    await nc.flush();
    await expect(nc.request('silent', 'x', { timeout: 200 })).rejects.toThrow(/timeout/i);
  });

  it('still rejects a request whose connection closes before its answer', async () => {
    const mine = await connect({ ...natsServerOptions(nats.url), noAsyncTraces: true });
    mine.subscribe('slow', { callback: () => undefined });
    await mine.flush();
    const cut = mine.request('slow', 'x', { timeout: 10_000 });
    await mine.close();
    await expect(cut).rejects.toThrow(/closed/i);
  });
});
