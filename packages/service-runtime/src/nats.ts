import { RequestOne } from '@nats-io/nats-core/internal';
import { connect, type NatsConnection } from '@nats-io/transport-node';
import type { Logger } from './logger.js';

type AnsweredRequest = RequestOne & { answered?: true };

/**
 * nats.js (3.4) ends every answered request with `cancel()`, which rejects the request's promise
 * with a new `RequestError("cancelled")`: a no-op on a promise the answer already settled, but
 * the error is built, stack capture included, for every request (each JetStream publish of an
 * outbox relay, each rate-limit KV read and update). Once a request is answered, its `cancel()`
 * now only stops the timer and leaves the mux, as before, without the error. A request cancelled
 * before its answer (connection closed, drained) is rejected exactly as before. Idempotent.
 */
export function skipErrorOfAnsweredRequests(): void {
  const proto = RequestOne.prototype as AnsweredRequest & { skipsAnsweredError?: true };
  if (proto.skipsAnsweredError) return;
  const { resolver, cancel } = proto;
  proto.resolver = function (this: AnsweredRequest, err, msg) {
    this.answered = true;
    resolver.call(this, err, msg);
  };
  proto.cancel = function (this: AnsweredRequest, err?: Error) {
    if (err || !this.answered) return cancel.call(this, err);
    if (this.timer) this.timer.cancel();
    this.mux.cancel(this);
  };
  proto.skipsAnsweredError = true;
}
skipErrorOfAnsweredRequests();

export type { NatsConnection };

/** Connects with unlimited reconnects, so a NATS restart is survived rather than fatal. */
export async function connectNats(url: string, name: string, logger: Logger): Promise<NatsConnection> {
  // No stack capture per request (a TimeoutError and a RequestError each, built in advance).
  const nc = await connect({ servers: url.split(','), name, noAsyncTraces: true, maxReconnectAttempts: -1, reconnectTimeWait: 250 });
  (async () => {
    for await (const s of nc.status()) {
      if (s.type === 'disconnect' || s.type === 'reconnect') logger.info({ nats: s.type }, 'nats connection status');
    }
  })().catch(() => undefined);
  return nc;
}
