import { connect, type NatsConnection } from '@nats-io/transport-node';
import type { Logger } from './logger.js';

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
