import { createServer, type Server } from 'node:http';
import type { MikroORM } from '@mikro-orm/postgresql';
import { connect, type NatsConnection } from '@nats-io/transport-node';
import { serveMetrics } from '@billing/telemetry';
import type { Logger } from './logger.js';
import { natsServerOptions } from './nats.js';

/** One thing a service needs to do its work; `probe` throws (or times out) when it is not available. */
export interface Dependency {
  name: string;
  probe(): Promise<void>;
  close?(): Promise<void> | void;
}

export interface ReadinessReport {
  status: 'ready' | 'not_ready';
  /** Each dependency: `ok`, or why not. */
  checks: Record<string, string>;
}

const PROBE_TIMEOUT_MS = 3000;

function withTimeout(p: Promise<void>, ms: number): Promise<void> {
  let timer: NodeJS.Timeout;
  return Promise.race([p, new Promise<void>((_, reject) => (timer = setTimeout(() => reject(new Error(`no answer within ${ms} ms`)), ms)))]).finally(() => clearTimeout(timer));
}

/**
 * Whether a service can do its work now: every dependency answers. Evaluated on each readiness
 * probe, and in the background to keep the gRPC health service's status current.
 */
export class Readiness {
  private timer: NodeJS.Timeout | undefined;
  private stopped = false;

  constructor(private readonly dependencies: Dependency[]) {}

  async evaluate(): Promise<ReadinessReport> {
    const results = await Promise.all(
      this.dependencies.map(async (d) => {
        try {
          await withTimeout(d.probe(), PROBE_TIMEOUT_MS);
          return [d.name, 'ok'] as const;
        } catch (e) {
          return [d.name, (e as Error).message || 'unavailable'] as const;
        }
      }),
    );
    const checks = Object.fromEntries(results);
    return { status: results.every(([, r]) => r === 'ok') ? 'ready' : 'not_ready', checks };
  }

  /** Re-evaluates every 2 s (every 250 ms while not ready) and reports each result. */
  watch(onResult: (ready: boolean) => void): void {
    const loop = async () => {
      const ready = (await this.evaluate()).status === 'ready';
      if (this.stopped) return;
      onResult(ready);
      this.timer = setTimeout(loop, ready ? 2000 : 250);
      this.timer.unref();
    };
    void loop();
  }

  async stop(): Promise<void> {
    this.stopped = true;
    clearTimeout(this.timer);
    for (const d of this.dependencies) await d.close?.();
  }
}

/** The service's Postgres: `select 1` on its pool. */
export function postgresDependency(orm: MikroORM): Dependency {
  return { name: 'postgres', probe: async () => void (await orm.em.getConnection().execute('select 1')) };
}

/**
 * How often the readiness connection pings NATS, and how many pings may go unanswered before it
 * counts as disconnected: a server that stops answering without closing the connection (hung,
 * or cut off by the network) is not ready within about three seconds, not nats.js's default of
 * two pings two minutes apart.
 */
const NATS_HEALTH_PING_MS = 1000;
const NATS_HEALTH_MAX_PINGS_OUT = 2;

/**
 * NATS: the state of a connection of its own (connected, not reconnecting, answering its pings).
 * The probe itself makes no round trip, so a busy server or event loop does not flap readiness.
 */
export function natsDependency(url: string, name: string): Dependency {
  let nc: NatsConnection | undefined;
  let connected = false;
  const connecting = connect({
    ...natsServerOptions(url),
    name: `${name}-health`,
    maxReconnectAttempts: -1,
    reconnectTimeWait: 500,
    waitOnFirstConnect: true,
    pingInterval: NATS_HEALTH_PING_MS,
    maxPingOut: NATS_HEALTH_MAX_PINGS_OUT,
  }).then(
    (c) => {
      nc = c;
      connected = true;
      void (async () => {
        for await (const s of c.status()) {
          if (s.type === 'disconnect') connected = false;
          else if (s.type === 'reconnect') connected = true;
        }
      })().catch(() => undefined);
    },
    () => undefined,
  );
  return {
    name: 'nats',
    probe: async () => {
      if (!nc || nc.isClosed() || !connected) throw new Error('not connected');
    },
    close: async () => {
      await Promise.race([connecting, new Promise((r) => setTimeout(r, 100))]);
      await nc?.close().catch(() => undefined);
    },
  };
}

/** Another service of the platform, through its gRPC health service (SERVING when it is ready). */
export function grpcServiceDependency(name: string, address: string): Dependency {
  // Created on the first probe: importing the gRPC client here would load the ORM (through
  // grpc.js's error mapping) into processes that need neither, e.g. the sandbox provider.
  let client: ReturnType<typeof import('./grpc.js').createClient> | undefined;
  return {
    name,
    probe: async () => {
      client ??= (await import('./grpc.js')).createClient('grpc.health.v1.Health', address, PROBE_TIMEOUT_MS, { serverName: name });
      const res = await client.Check({ service: '' });
      if (res.status !== 'SERVING') throw new Error(String(res.status).toLowerCase());
    },
    close: () => client?.close(),
  };
}

/** An HTTP service, through a GET of its health path (2xx when it is ready). */
export function httpServiceDependency(name: string, url: string): Dependency {
  return {
    name,
    probe: async () => {
      const res = await fetch(url, { signal: AbortSignal.timeout(PROBE_TIMEOUT_MS) });
      await res.body?.cancel();
      if (!res.ok) throw new Error(`HTTP ${res.status}`);
    },
  };
}

/** Answers `/health/live`, `/health/ready` and `/metrics` for one service. */
export function serveOps(readiness: Readiness) {
  return async (req: import('node:http').IncomingMessage, res: import('node:http').ServerResponse): Promise<void> => {
    const path = (req.url ?? '/').split('?')[0];
    if (req.method !== 'GET' && req.method !== 'HEAD') return void res.writeHead(405, { allow: 'GET, HEAD' }).end();
    if (path === '/metrics') return serveMetrics(req, res);
    if (path === '/health/live') return void res.writeHead(200, { 'content-type': 'application/json' }).end('{"status":"ok"}');
    if (path === '/health/ready') {
      const report = await readiness.evaluate();
      return void res.writeHead(report.status === 'ready' ? 200 : 503, { 'content-type': 'application/json' }).end(JSON.stringify(report));
    }
    res.writeHead(404).end();
  };
}

export interface OpsListener {
  port: number;
  readiness: Readiness;
  close(): Promise<void>;
}

/**
 * Starts a service's operations listener (`METRICS_HOST`:`METRICS_PORT`): Prometheus metrics
 * and liveness/readiness probes over plain HTTP, apart from the service's API. `setServing`
 * (the gRPC health service's) follows readiness.
 */
export async function startOps(
  opts: { host: string; port: number; logger: Logger; dependencies: Dependency[]; setServing?: (serving: boolean) => void },
): Promise<OpsListener> {
  const readiness = new Readiness(opts.dependencies);
  if (opts.setServing) {
    opts.setServing(false);
    readiness.watch(opts.setServing);
  }
  const handle = serveOps(readiness);
  const server: Server = createServer((req, res) => void handle(req, res).catch(() => res.writeHead(500).end()));
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(opts.port, opts.host, () => resolve());
  });
  const port = (server.address() as import('node:net').AddressInfo).port;
  opts.logger.info({ host: opts.host, port }, 'metrics and health probes listening');
  return {
    port,
    readiness,
    close: async () => {
      await readiness.stop();
      await new Promise<void>((r) => server.close(() => r()));
    },
  };
}
