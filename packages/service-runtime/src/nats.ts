import { RequestOne } from '@nats-io/nats-core/internal';
import { connect, type ConnectionOptions, type NatsConnection } from '@nats-io/transport-node';
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

/** The servers and credentials of a `NATS_URL`, as nats.js takes them. */
export type NatsServerOptions = Pick<ConnectionOptions, 'servers' | 'user' | 'pass' | 'token'>;

/** `nats://`, `tls://`, `ws://`, ... at the start of a server. */
const SCHEME = /^[a-z][a-z0-9+.-]*:\/\//i;

interface NatsCredentials {
  user?: string;
  pass?: string;
  token?: string;
}

/** One server of a `NATS_URL`: the server without its userinfo, and the credentials that held. */
function splitServer(server: string): { server: string; credentials?: NatsCredentials } {
  const scheme = SCHEME.exec(server)?.[0] ?? '';
  const rest = server.slice(scheme.length);
  const at = rest.lastIndexOf('@');
  if (at < 0) return { server };
  const userinfo = rest.slice(0, at);
  const colon = userinfo.indexOf(':');
  const decode = (v: string) => {
    try {
      return decodeURIComponent(v);
    } catch {
      throw new Error('NATS_URL: its credentials are not percent-encoded correctly');
    }
  };
  const credentials = colon < 0 ? { token: decode(userinfo) } : { user: decode(userinfo.slice(0, colon)), pass: decode(userinfo.slice(colon + 1)) };
  return { server: scheme + rest.slice(at + 1), credentials };
}

/**
 * How every connection of the platform reaches NATS: `NATS_URL` is one server or several,
 * comma-separated (`nats://host:port`, or `host:port`), and carries the credentials the way a
 * database URL does: `nats://user:password@host:port` (user and password percent-encoded) or
 * `nats://token@host:port`. nats.js does not read credentials from a server URL, so they are
 * taken out of it and given as options, which it also uses for servers it learns from the
 * cluster. Servers of one URL that name different credentials are refused.
 */
export function natsServerOptions(url: string): NatsServerOptions {
  let credentials: NatsCredentials | undefined;
  const servers = url
    .split(',')
    .map((s) => s.trim())
    .filter(Boolean)
    .map((s) => {
      const split = splitServer(s);
      if (split.credentials) {
        if (credentials && JSON.stringify(credentials) !== JSON.stringify(split.credentials)) throw new Error('NATS_URL: its servers name different credentials');
        credentials = split.credentials;
      }
      return split.server;
    });
  return { servers, ...credentials };
}

/** Connects with unlimited reconnects, so a NATS restart is survived rather than fatal. */
export async function connectNats(url: string, name: string, logger: Logger): Promise<NatsConnection> {
  // No stack capture per request (a TimeoutError and a RequestError each, built in advance).
  const nc = await connect({ ...natsServerOptions(url), name, noAsyncTraces: true, maxReconnectAttempts: -1, reconnectTimeWait: 250 });
  (async () => {
    for await (const s of nc.status()) {
      if (s.type === 'disconnect' || s.type === 'reconnect') logger.info({ nats: s.type }, 'nats connection status');
    }
  })().catch(() => undefined);
  return nc;
}
