// Runs the built services (services/<name>/dist/main.js) as child processes on chosen ports,
// wired to each other, to one Postgres server and one NATS server.
import { randomBytes } from 'node:crypto';
import { existsSync } from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { ensureGrpcCertificates, GRPC_PEERS } from './grpc-certs.mjs';
import { checkGrpcHealth, checkHttpHealth, listensOn } from './health.mjs';
import { canConnect, findFreePort } from './ports.mjs';
import { describeExit, spawnProcess, waitUntil } from './processes.mjs';
import { fillTemplate, portFromTemplate, SERVICES } from './services.mjs';

export const REPO_ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../..');

/** @typedef {import('./services.mjs').ServiceSpec} ServiceSpec */
/** @typedef {import('./processes.mjs').ExitStatus} ExitStatus */

/**
 * @typedef {object} StartPlatformOptions
 * @property {string} databaseUrl
 * @property {string} natsUrl
 * @property {'development' | 'test' | 'production'} [mode] PLATFORM_MODE; default development.
 * @property {string} [logLevel] LOG_LEVEL; default info.
 * @property {string} [adminToken] BILLING_ADMIN_TOKEN for the gateway; random when omitted.
 * @property {Record<string, string | undefined>} [env] Env overrides for every service (undefined unsets).
 * @property {Record<string, Record<string, string | undefined>>} [serviceEnv] Env overrides per service.
 * @property {string[]} [services] Services to start. Default: every service whose dist/main.js exists.
 * @property {'free' | 'default'} [ports] `free` (the default): any free ports. `default`: each
 *   service's usual port, or the one its listen variable sets in `baseEnv`, when free.
 * @property {number} [portBase] Service number i of the manifest listens on portBase + i.
 * @property {string} [host] Address the services bind; default 127.0.0.1.
 * @property {string} [grpcCertsDir] Where the installation's gRPC authority and service
 *   certificates are (created when missing); default `.data/grpc-tls`. Each service gets its
 *   own as GRPC_TLS_CA/GRPC_TLS_CERT/GRPC_TLS_KEY unless `env`/`serviceEnv` set them.
 * @property {boolean} [migrate] Run `main.js migrate` for each service before starting any.
 * @property {boolean} [detached] Run the services in their own process groups, so a terminal
 *   Ctrl-C reaches only the launcher, which then stops them dependents-first. Default false:
 *   under a test runner they should die with it.
 * @property {(name: string, line: string, stream: 'stdout' | 'stderr') => void} [onLog]
 * @property {(name: string, pid: number) => void} [onSpawn] A service process was started.
 * @property {(name: string, status: ExitStatus, logs: string[]) => void} [onUnexpectedExit] A
 *   service exited after becoming healthy without being asked to; `logs` is its recent output.
 * @property {number} [startTimeoutMs] How long each service may take to become healthy; default 60 s.
 * @property {number} [stopGraceMs] SIGTERM → SIGKILL delay; default 10 s.
 * @property {NodeJS.ProcessEnv} [baseEnv] Environment the services inherit; default process.env.
 */

/**
 * @typedef {object} ServiceProcess
 * @property {string} name
 * @property {number} port
 * @property {string} address `127.0.0.1:<port>` for gRPC, `http://127.0.0.1:<port>` for HTTP.
 * @property {number | undefined} pid Undefined while not running.
 * @property {string} [metricsUrl] Its operations listener: `/metrics`, `/health/live`, `/health/ready`.
 * @property {string[]} logs Recent output lines across restarts, oldest first.
 * @property {() => boolean} running
 * @property {(signal?: NodeJS.Signals) => boolean} kill Sends a signal. An exit it causes is
 *   not reported as unexpected.
 * @property {() => Promise<ExitStatus | undefined>} stop SIGTERM, then SIGKILL after the grace period.
 * @property {() => Promise<void>} start Starts it again (after stop/kill) and waits until healthy.
 * @property {() => Promise<void>} restart stop() then start().
 */

/**
 * @typedef {object} Platform
 * @property {string | undefined} gatewayUrl Undefined when the gateway is not running.
 * @property {string} adminToken
 * @property {string} databaseUrl
 * @property {string} natsUrl
 * @property {string[]} services Names of the started services, in start order.
 * @property {import('./grpc-certs.mjs').GrpcCertificates} grpcCerts The certificates the services
 *   use; `grpcCerts.envFor('gateway')` lets a test call a service as the gateway.
 * @property {Record<string, ServiceProcess>} processes
 * @property {() => Promise<void>} stop Stops every service, dependents first.
 */

/**
 * Starts the services, each once the services it connects to are healthy, and resolves when
 * all are healthy. On failure stops whatever it started and rejects with the failing service's
 * recent output.
 * @param {StartPlatformOptions} opts
 * @returns {Promise<Platform>}
 */
export async function startPlatform(opts) {
  const baseEnv = opts.baseEnv ?? process.env;
  const host = opts.host ?? '127.0.0.1';
  const connectHost = host === '0.0.0.0' || host === '::' ? '127.0.0.1' : host;
  const adminToken = opts.adminToken ?? randomBytes(32).toString('base64url');
  const mode = opts.mode ?? 'development';
  const specs = selectServices(opts.services);
  const grpcCerts = ensureGrpcCertificates(opts.grpcCertsDir ?? path.join(REPO_ROOT, '.data', 'grpc-tls'));
  /** @param {string} name */
  const tlsEnvOf = (name) => (GRPC_PEERS.includes(name) ? grpcCerts.envFor(name) : {});
  const names = new Set(specs.map((s) => s.name));

  /** @type {Map<string, number>} */
  const ports = new Map();
  for (const spec of specs) ports.set(spec.name, await choosePort(spec, opts, baseEnv));
  // Each service's operations listener (/metrics, /health/live, /health/ready), on 127.0.0.1.
  /** @type {Map<string, number>} */
  const metricsPorts = new Map();
  for (const spec of specs) {
    const index = SERVICES.indexOf(spec);
    metricsPorts.set(spec.name, opts.portBase !== undefined ? opts.portBase + 100 + index : await findFreePort(opts.ports === 'default' ? METRICS_PORT_BASE + index : undefined));
  }
  /** @param {string} name */
  const addressOf = (name) => {
    const spec = /** @type {ServiceSpec} */ (SERVICES.find((s) => s.name === name));
    const hostPort = `${connectHost.includes(':') ? `[${connectHost}]` : connectHost}:${ports.get(name)}`;
    return spec.protocol === 'grpc' ? hostPort : `http://${hostPort}`;
  };

  /** @param {ServiceSpec} spec */
  const envFor = (spec) => {
    /** @type {Record<string, string | undefined>} */
    const env = Object.fromEntries(Object.entries(baseEnv).filter(([k]) => !k.startsWith('VITEST')));
    Object.assign(env, {
      DATABASE_URL: opts.databaseUrl,
      NATS_URL: opts.natsUrl,
      PLATFORM_MODE: mode,
      LOG_LEVEL: opts.logLevel ?? 'info',
      ...tlsEnvOf(spec.name),
    });
    env.METRICS_HOST = '127.0.0.1';
    env.METRICS_PORT = String(metricsPorts.get(spec.name));
    for (const [k, template] of Object.entries(spec.listen)) env[k] = fillTemplate(template, { host, port: /** @type {number} */ (ports.get(spec.name)) });
    for (const [k, target] of Object.entries(spec.connectsTo ?? {})) if (names.has(target)) env[k] = addressOf(target);
    const launch = { adminToken, mode, addressOf: (/** @type {string} */ name) => (names.has(name) ? addressOf(name) : undefined) };
    Object.assign(env, spec.env?.(launch), opts.env, opts.serviceEnv?.[spec.name]);
    for (const k of Object.keys(env)) if (env[k] === undefined) delete env[k];
    return /** @type {NodeJS.ProcessEnv} */ (env);
  };

  if (opts.migrate) await runMigrations(specs.filter((s) => s.migrations !== false), envFor, opts);

  /** @type {Record<string, ServiceProcess>} */
  const processes = {};
  /** @type {ServiceSpec[][]} */
  const waves = startWaves(specs);
  // The environment each started service got: a service started earlier can carry the address
  // of one started later (identity's and checkout's PUBLIC_BASE_URL is the gateway's), so when a
  // later one moves to another port, those whose environment that changed are restarted with it.
  /** @type {Map<string, string>} */
  const startedWith = new Map();
  /** @param {ServiceSpec} spec */
  const envText = (spec) => JSON.stringify(envFor(spec));
  const restartOutdated = async () => {
    for (const [name, text] of startedWith) {
      const spec = /** @type {ServiceSpec} */ (specs.find((s) => s.name === name));
      if (envText(spec) === text) continue;
      await processes[name].stop();
      await processes[name].start();
      startedWith.set(name, envText(spec));
    }
  };
  try {
    for (const wave of waves) {
      // allSettled: on a failure, the rest of the wave has finished spawning before stopAll.
      const results = await Promise.allSettled(
        wave.map(async (spec) => {
          const svc = createServiceProcess(spec, {
            opts,
            env: () => envFor(spec),
            tls: () => {
              const env = envFor(spec);
              return { GRPC_TLS_CA: env.GRPC_TLS_CA, GRPC_TLS_CERT: env.GRPC_TLS_CERT, GRPC_TLS_KEY: env.GRPC_TLS_KEY };
            },
            port: () => /** @type {number} */ (ports.get(spec.name)),
            address: () => addressOf(spec.name),
            connectHost,
          });
          svc.metricsUrl = `http://127.0.0.1:${metricsPorts.get(spec.name)}`;
          processes[spec.name] = svc;
          for (let attempt = 1; ; attempt++) {
            try {
              await svc.start();
              startedWith.set(spec.name, envText(spec));
              break;
            } catch (e) {
              // Another process took a port between our check and the bind: the service's own
              // or its operations listener's (METRICS_PORT; it moved only the former, so a clash
              // on the latter stopped npm start). The services that connect to this one start
              // later, so it can move; whichever port the error names moves (both if none).
              const clashed = portClash(svc.logs);
              if (!clashed || opts.portBase !== undefined || attempt === 3) throw e;
              const service = /** @type {number} */ (ports.get(spec.name));
              const metrics = /** @type {number} */ (metricsPorts.get(spec.name));
              const named = clashed.has(service) || clashed.has(metrics);
              if (!named || clashed.has(service)) ports.set(spec.name, await findFreePort());
              if (!named || clashed.has(metrics)) {
                metricsPorts.set(spec.name, await findFreePort());
                svc.metricsUrl = `http://127.0.0.1:${metricsPorts.get(spec.name)}`;
              }
              // Links the services started before it hand out name its new address.
              await restartOutdated();
            }
          }
        }),
      );
      const failure = results.find((r) => r.status === 'rejected');
      if (failure) throw failure.reason;
    }
  } catch (e) {
    await stopAll(waves, processes);
    throw e;
  }

  const gateway = processes.gateway;
  return {
    gatewayUrl: gateway ? gateway.address : undefined,
    adminToken,
    databaseUrl: opts.databaseUrl,
    natsUrl: opts.natsUrl,
    services: specs.map((s) => s.name),
    grpcCerts,
    processes,
    stop: () => stopAll(waves, processes),
  };
}

/** `npm start` puts service i's operations listener on this port + i (or the next free one). */
const METRICS_PORT_BASE = 9464;

/**
 * Node's flags for a service process: V8's young generation capped at NODE_MAX_SEMI_SPACE_MB
 * (default 4; 0 leaves V8's default, 16 on 64-bit). Start-up grows the young generation to its
 * cap and V8 never gives it back, so the cap is most of a service's idle RSS above its live
 * heap; 4 MB keeps every service, the gateway included, under 120 MB idle (8 MB left the
 * gateway at 119–127), at no cost the writes and billing-run benchmarks could tell from their
 * run-to-run spread (see the README). This command-line flag wins over the same flag in
 * NODE_OPTIONS.
 * @param {NodeJS.ProcessEnv} env
 * @returns {string[]}
 */
export function nodeFlags(env) {
  const raw = env.NODE_MAX_SEMI_SPACE_MB ?? String(DEFAULT_MAX_SEMI_SPACE_MB);
  const mb = Number(raw);
  if (!Number.isInteger(mb) || mb < 0 || mb > 1024) throw new Error(`NODE_MAX_SEMI_SPACE_MB must be an integer from 0 to 1024 (got ${JSON.stringify(raw)})`);
  // V8 reads 0 as "its own default".
  return [`--max-semi-space-size=${mb}`];
}

export const DEFAULT_MAX_SEMI_SPACE_MB = 4;

/** @param {string} name */
export function distEntry(name) {
  return path.join(REPO_ROOT, 'services', name, 'dist', 'main.js');
}

/**
 * @param {string[] | undefined} requested
 * @returns {ServiceSpec[]}
 */
function selectServices(requested) {
  if (!requested) return SERVICES.filter((s) => existsSync(distEntry(s.name)));
  const unknown = requested.filter((n) => !SERVICES.some((s) => s.name === n));
  if (unknown.length) throw new Error(`unknown service(s): ${unknown.join(', ')}; known: ${SERVICES.map((s) => s.name).join(', ')}`);
  const specs = SERVICES.filter((s) => requested.includes(s.name));
  const unbuilt = specs.filter((s) => !existsSync(distEntry(s.name)));
  if (unbuilt.length) throw new Error(`not built: ${unbuilt.map((s) => distEntry(s.name)).join(', ')} (run npx turbo run build)`);
  return specs;
}

/**
 * @param {ServiceSpec} spec
 * @param {StartPlatformOptions} opts
 * @param {NodeJS.ProcessEnv} baseEnv
 */
async function choosePort(spec, opts, baseEnv) {
  if (opts.portBase !== undefined) return opts.portBase + SERVICES.indexOf(spec);
  if (opts.ports !== 'default') return findFreePort();
  const configured = Object.entries(spec.listen)
    .map(([k, template]) => portFromTemplate(template, baseEnv[k]))
    .find((p) => p !== undefined);
  return findFreePort(configured ?? spec.defaultPort);
}

/**
 * Groups services so each starts after every service it connects to.
 * @param {ServiceSpec[]} specs
 * @returns {ServiceSpec[][]}
 */
function startWaves(specs) {
  const names = new Set(specs.map((s) => s.name));
  const done = new Set();
  /** @type {ServiceSpec[][]} */
  const waves = [];
  let pending = [...specs];
  while (pending.length) {
    const ready = pending.filter((s) => Object.values(s.connectsTo ?? {}).every((t) => !names.has(t) || t === s.name || done.has(t)));
    if (!ready.length) throw new Error(`services connect to each other in a cycle: ${pending.map((s) => s.name).join(', ')}`);
    waves.push(ready);
    for (const s of ready) done.add(s.name);
    pending = pending.filter((s) => !ready.includes(s));
  }
  return waves;
}

/**
 * @param {ServiceSpec[][]} waves
 * @param {Record<string, ServiceProcess>} processes
 */
async function stopAll(waves, processes) {
  for (const wave of [...waves].reverse()) await Promise.all(wave.map((s) => processes[s.name]?.stop()));
}

/**
 * Whether the last attempt's output says a port was taken, with the ports it names (the clash
 * of an earlier attempt names a port given up since, so it matches no current one).
 * @param {string[]} logs
 * @returns {Set<number> | undefined}
 */
function portClash(logs) {
  const tail = logs.slice(-50);
  if (!tail.some((l) => /EADDRINUSE|address already in use|No address added out of total/i.test(l))) return undefined;
  return new Set(tail.flatMap((l) => [...l.matchAll(/address already in use \S*:(\d+)/gi)].map((m) => Number(m[1]))));
}

/**
 * @param {ServiceSpec} spec
 * @param {{ opts: StartPlatformOptions, env: () => NodeJS.ProcessEnv, tls: () => Record<string, string | undefined>, port: () => number, address: () => string, connectHost: string }} ctx
 * @returns {ServiceProcess}
 */
function createServiceProcess(spec, ctx) {
  const { opts } = ctx;
  /** @type {string[]} */
  const logs = [];
  /** @type {import('./processes.mjs').ManagedProcess | undefined} */
  let proc;
  let expectExit = false;
  const grace = opts.stopGraceMs ?? 10_000;

  const healthy = async () => {
    const port = ctx.port();
    // Not ready while another program answers on its port (it took the port first; the service
    // is about to fail with EADDRINUSE and move to another one).
    if (proc && listensOn(proc.pid, port) === false) return false;
    // A service checks itself with its own certificate, as in a container.
    if (spec.protocol === 'grpc') return checkGrpcHealth(`${ctx.connectHost}:${port}`, { tls: ctx.tls(), serverName: spec.name });
    if (spec.healthPath) return checkHttpHealth(`${ctx.address()}${spec.healthPath}`);
    return canConnect(ctx.connectHost, port);
  };

  /** @type {ServiceProcess} */
  const svc = {
    name: spec.name,
    get port() {
      return ctx.port();
    },
    get address() {
      return ctx.address();
    },
    get pid() {
      return proc?.running() ? proc.pid : undefined;
    },
    logs,
    running: () => proc?.running() ?? false,
    kill: (signal = 'SIGTERM') => {
      if (!proc?.running()) return false;
      expectExit = true;
      return proc.kill(signal);
    },
    stop: async () => {
      if (!proc?.running()) return undefined;
      expectExit = true;
      return proc.stop(grace);
    },
    start: async () => {
      if (proc?.running()) throw new Error(`${spec.name} is already running (pid ${proc.pid})`);
      expectExit = false;
      const env = ctx.env();
      const started = await spawnProcess(spec.name, process.execPath, {
        args: [...nodeFlags(env), distEntry(spec.name)],
        cwd: REPO_ROOT,
        env,
        detached: opts.detached,
        exitSignal: 'SIGTERM',
        logs,
        keepLines: 2000,
        onLine: (line, stream) => opts.onLog?.(spec.name, line, stream),
      });
      proc = started;
      opts.onSpawn?.(spec.name, started.pid);
      let ready = false;
      // A failure to start is reported by start() itself; this is for a crash afterwards.
      started.exited.then((status) => {
        if (ready && !expectExit && proc === started) opts.onUnexpectedExit?.(spec.name, status, logs);
      });
      const where = spec.protocol === 'grpc' ? `${ctx.connectHost}:${ctx.port()}` : ctx.address();
      try {
        await waitUntil(`${spec.name} to become healthy on ${where}`, healthy, {
          timeoutMs: opts.startTimeoutMs ?? 60_000,
          intervalMs: 100,
          abort: started.exited.then((s) => `${spec.name} ${describeExit(s)}`),
        });
        ready = true;
      } catch (e) {
        expectExit = true;
        await started.stop(grace);
        const tail = logs.slice(-40).join('\n');
        throw new Error(`${/** @type {Error} */ (e).message}\n--- last output of ${spec.name} ---\n${tail || '(none)'}`, { cause: e });
      }
    },
    restart: async () => {
      await svc.stop();
      await svc.start();
    },
  };
  return svc;
}

/**
 * Runs `main.js migrate` for every service at once (each owns its own schema).
 * @param {ServiceSpec[]} specs
 * @param {(spec: ServiceSpec) => NodeJS.ProcessEnv} envFor
 * @param {StartPlatformOptions} opts
 */
async function runMigrations(specs, envFor, opts) {
  /** @type {string[]} */
  const failures = [];
  await Promise.all(
    specs.map(async (spec) => {
      const proc = await spawnProcess(`${spec.name} migrate`, process.execPath, {
        args: [distEntry(spec.name), 'migrate'],
        cwd: REPO_ROOT,
        env: envFor(spec),
        onLine: (line, stream) => opts.onLog?.(spec.name, line, stream),
      });
      let timedOut = false;
      const timer = setTimeout(() => {
        timedOut = true;
        void proc.stop(5000);
      }, 90_000);
      const status = await proc.exited;
      clearTimeout(timer);
      if (timedOut) failures.push(`${spec.name} migrate did not exit within 90 s (does its main.js handle the \`migrate\` argument?)`);
      else if (status.code !== 0) failures.push(`${spec.name} migrate ${describeExit(status)}:\n${proc.logs.slice(-30).join('\n')}`);
    }),
  );
  if (failures.length) throw new Error(`migrations failed:\n${failures.join('\n\n')}`);
}

