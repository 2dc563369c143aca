#!/usr/bin/env node
// The developer entry point: install, build, bring up Postgres and NATS, then
//   start   run every built service and wait for Ctrl-C          (npm start)
//   test    run vitest against the infrastructure                  (npm test -- [vitest args])
//   bench   run bench/run.mjs against the infrastructure           (npm run bench -- [args])
// Only Node built-ins are imported statically: this runs before node_modules exists.
import { spawn } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { isAlive, lockDir } from './lib/dir-lock.mjs';
import { createLogPrinter } from './lib/log-format.mjs';
import { CHROMIUM_INSTALL_HINT, findChromium } from './lib/chromium.mjs';
import { findNatsServer, NATS_INSTALL_HINT, redactNatsUrl, startNatsServer } from './lib/nats.mjs';
import { ensurePostgres, redact } from './lib/postgres.mjs';
import { describeExit, sleep } from './lib/processes.mjs';
import { SERVICES } from './lib/services.mjs';
import { REPO_ROOT, startPlatform } from './lib/start-platform.mjs';
import { createSupervisor } from './lib/supervisor.mjs';
import { buildAll, ensureDependencies } from './lib/workspace.mjs';

const DATA_DIR = path.join(REPO_ROOT, '.data');
/** One file per running launcher listing the processes it started: `<launcher pid>.json`. */
const LAUNCHERS_DIR = path.join(DATA_DIR, 'launchers');
const USAGE = `usage: node scripts/platform.mjs <start|test|bench> [args]

  start         build, start Postgres, NATS and every built service; Ctrl-C stops all
  test [args]   build, start Postgres, run vitest (args go to vitest)
  bench [args]  build, start Postgres, run bench/run.mjs (args go to it)

Environment: DATABASE_URL, NATS_URL (use these servers instead of starting them), PG_PORT,
NATS_SERVER_BIN, PLATFORM_SKIP_BUILD=1, BILLING_ADMIN_TOKEN, PLATFORM_MODE, LOG_LEVEL, HOST.
See README.md.`;

const color = process.stdout.isTTY === true && !process.env.NO_COLOR;
/** @param {string} msg */
const log = (msg) => console.log(`${color ? '\x1b[1;36mplatform\x1b[0m' : 'platform'} ${msg}`);

/** Undo actions for what this launcher started, run last-first. @type {(() => Promise<void> | void)[]} */
const cleanups = [];
/** @type {Promise<void> | undefined} */
let tearingDown;
function teardown() {
  tearingDown ??= (async () => {
    while (cleanups.length) {
      const undo = /** @type {() => Promise<void> | void} */ (cleanups.pop());
      try {
        await undo();
      } catch (e) {
        log(`clean-up failed: ${/** @type {Error} */ (e).message}`);
      }
    }
  })();
  return tearingDown;
}

/** @param {number} code */
async function exit(code) {
  await teardown();
  process.exit(code);
}

/** What a signal does at this moment; replaced as the launcher moves between phases. */
let onSignal = (/** @type {NodeJS.Signals} */ _signal) => {
  log('interrupted; cleaning up');
  void exit(130);
};
let signals = 0;
for (const signal of /** @type {const} */ (['SIGINT', 'SIGTERM'])) {
  process.on(signal, () => {
    if (++signals > 1 && tearingDown) {
      log('second signal: exiting without waiting');
      process.exit(130);
    }
    onSignal(signal);
  });
}

/** @param {number} pid */
function cmdlineOf(pid) {
  try {
    return fs.readFileSync(`/proc/${pid}/cmdline`, 'utf8');
  } catch {
    return undefined;
  }
}

/**
 * Records the processes this launcher started, so that if it is killed outright (SIGKILL,
 * OOM) the next launcher can stop them (`reapOrphans`).
 * @param {{ pid: number | undefined, signal: NodeJS.Signals }[]} children
 */
function recordChildren(children) {
  fs.mkdirSync(LAUNCHERS_DIR, { recursive: true });
  const file = path.join(LAUNCHERS_DIR, `${process.pid}.json`);
  const known = children.filter((c) => c.pid).map((c) => ({ ...c, cmdline: cmdlineOf(/** @type {number} */ (c.pid)) }));
  fs.writeFileSync(file, JSON.stringify({ children: known }));
  if (!cleanups.includes(forgetChildren)) cleanups.unshift(forgetChildren);
}
function forgetChildren() {
  fs.rmSync(path.join(LAUNCHERS_DIR, `${process.pid}.json`), { force: true });
}

/** Stops what launchers that no longer exist left running (only processes still running the recorded command). */
async function reapOrphans() {
  let files;
  try {
    files = fs.readdirSync(LAUNCHERS_DIR).filter((f) => f.endsWith('.json'));
  } catch {
    return;
  }
  for (const file of files) {
    const launcher = Number.parseInt(file, 10);
    if (launcher === process.pid || isAlive(launcher)) continue;
    /** @type {{ children: { pid: number, signal: NodeJS.Signals, cmdline?: string }[] }} */
    let record = { children: [] };
    try {
      record = JSON.parse(fs.readFileSync(path.join(LAUNCHERS_DIR, file), 'utf8'));
    } catch {
      // unreadable: nothing to do but remove it
    }
    const orphans = record.children.filter((c) => c.cmdline && cmdlineOf(c.pid) === c.cmdline);
    if (orphans.length) {
      log(`stopping ${orphans.length} process(es) left running by launcher ${launcher}, which was killed`);
      for (const c of orphans) process.kill(c.pid, c.signal);
      for (let waited = 0; waited < 15_000 && orphans.some((c) => isAlive(c.pid)); waited += 200) await sleep(200);
      for (const c of orphans) if (isAlive(c.pid)) process.kill(c.pid, 'SIGKILL');
    }
    fs.rmSync(path.join(LAUNCHERS_DIR, file), { force: true });
  }
}

/**
 * Dependencies, build, Postgres; NATS when `withNats`, else only the nats-server binary.
 * `onNatsExit`: the nats-server started here exited of itself (`nats.restart()` starts it again);
 * `onPostgresExit` the same for the embedded Postgres (`postgres.restart()`).
 * @param {{ withNats: boolean, fastPostgres: boolean, onNatsExit?: (status: import('./lib/processes.mjs').ExitStatus) => void, onPostgresExit?: (status: import('./lib/processes.mjs').ExitStatus) => void }} opts
 */
async function bringUp(opts) {
  await reapOrphans();
  await ensureDependencies(REPO_ROOT, log);
  if (process.env.PLATFORM_SKIP_BUILD) log('PLATFORM_SKIP_BUILD is set: not building');
  else await buildAll(REPO_ROOT, log);

  fs.mkdirSync(DATA_DIR, { recursive: true });
  const pgPort = process.env.PG_PORT ? Number(process.env.PG_PORT) : undefined;
  const pg = await ensurePostgres({
    databaseUrl: process.env.DATABASE_URL || undefined,
    dataDir: path.join(DATA_DIR, 'postgres'),
    port: pgPort,
    preferredPort: 54329,
    fast: opts.fastPostgres,
    log,
    onExit: opts.onPostgresExit,
  });
  cleanups.push(pg.stop);
  recordChildren([{ pid: pg.pid, signal: 'SIGINT' }]);
  log(pg.started ? `Postgres ${redact(pg.url)} (embedded, data in ${pg.dataDir})` : `Postgres ${redact(pg.url)} (DATABASE_URL)`);
  if (pg.started) await dropLeftoverTestDatabases(pg.url);

  const givenNatsUrl = process.env.NATS_URL || undefined;
  const natsBin = findNatsServer({ install: !givenNatsUrl, log });
  if (!givenNatsUrl && !natsBin) throw new Error(NATS_INSTALL_HINT);
  const givenShown = givenNatsUrl && redactNatsUrl(givenNatsUrl);
  if (!opts.withNats) return { databaseUrl: pg.url, natsUrl: givenNatsUrl, natsShown: givenShown, natsBin, postgres: pg, pids: { postgres: pg.pid } };
  if (givenNatsUrl) {
    log(`NATS ${givenShown} (NATS_URL)`);
    return { databaseUrl: pg.url, natsUrl: givenNatsUrl, natsShown: givenShown, natsBin, postgres: pg, pids: { postgres: pg.pid } };
  }

  let storeDir = path.join(DATA_DIR, 'nats');
  const lock = lockDir(storeDir);
  if ('heldByPid' in lock) {
    storeDir = fs.mkdtempSync(path.join(os.tmpdir(), 'bp-nats-'));
    log(`.data/nats is in use by another launcher (pid ${lock.heldByPid}); using ${storeDir}`);
    const tmp = storeDir;
    cleanups.push(() => fs.rmSync(tmp, { recursive: true, force: true }));
  } else {
    cleanups.push(lock.release);
  }
  const nats = await startNatsServer({ bin: /** @type {string} */ (natsBin), storeDir, preferredPort: 4223, detached: true, onExit: opts.onNatsExit });
  cleanups.push(nats.stop);
  recordChildren([{ pid: pg.pid, signal: 'SIGINT' }, { pid: nats.pid(), signal: 'SIGTERM' }]);
  const natsShown = `${redactNatsUrl(nats.url)} (password in ${path.join(storeDir, 'auth.conf')})`;
  log(`NATS ${natsShown} (nats-server -js, store in ${storeDir})`);
  return { databaseUrl: pg.url, natsUrl: nats.url, natsShown, natsBin, nats, postgres: pg, pids: { postgres: pg.pid, nats: nats.pid() } };
}

/**
 * Test databases of runs that were killed before dropping them. Only called on a server this
 * launcher started and owns, so no other run is using them.
 * @param {string} url
 */
async function dropLeftoverTestDatabases(url) {
  const { default: pg } = await import('pg');
  const client = new pg.Client({ connectionString: url });
  await client.connect();
  try {
    const { rows } = await client.query(`select datname from pg_database where datname like 'bp\\_test\\_%'`);
    for (const { datname } of rows) await client.query(`drop database if exists ${client.escapeIdentifier(datname)} with (force)`);
    if (rows.length) log(`dropped ${rows.length} test database(s) left by earlier runs`);
  } finally {
    await client.end();
  }
}

/** The admin token of this data directory: BILLING_ADMIN_TOKEN, else generated once and kept in .data/admin-token. */
function adminToken() {
  if (process.env.BILLING_ADMIN_TOKEN) return process.env.BILLING_ADMIN_TOKEN;
  const file = path.join(DATA_DIR, 'admin-token');
  try {
    const saved = fs.readFileSync(file, 'utf8').trim();
    if (saved.length >= 32) return saved;
  } catch {
    // first start
  }
  const token = randomBytes(32).toString('base64url');
  fs.writeFileSync(file, `${token}\n`, { mode: 0o600 });
  return token;
}

/** The names the supervisor knows the launcher's own nats-server and embedded Postgres by. */
const NATS_PROCESS = 'nats-server';
const POSTGRES_PROCESS = 'postgres';

async function start() {
  /** @type {((status: import('./lib/processes.mjs').ExitStatus) => void) | undefined} */
  let natsExited;
  /** @type {((status: import('./lib/processes.mjs').ExitStatus) => void) | undefined} */
  let postgresExited;
  // The nats-server and the embedded Postgres started here (none with NATS_URL, DATABASE_URL)
  // are supervised as the services are: one that dies is started again on its port and store
  // (Postgres recovering from its WAL), and the services' clients and pools reconnect; until the
  // services run, its death stops the platform.
  const infra = await bringUp({
    withNats: true,
    fastPostgres: false,
    onNatsExit: (status) => natsExited?.(status),
    onPostgresExit: (status) => postgresExited?.(status),
  });
  const print = createLogPrinter({ names: SERVICES.map((s) => s.name) });
  const missing = SERVICES.filter((s) => !fs.existsSync(path.join(REPO_ROOT, 'services', s.name, 'dist', 'main.js'))).map((s) => s.name);
  if (missing.length) log(`not built, so not started: ${missing.join(', ')}`);
  if (missing.length === SERVICES.length) throw new Error('no service is built');

  let stopping = false;
  /** @type {ReturnType<typeof createSupervisor> | undefined} */
  let supervisor;
  const token = adminToken();
  /** @type {{ pid: number | undefined, signal: NodeJS.Signals }[]} */
  const infraChildren = [
    { pid: infra.pids?.postgres, signal: 'SIGINT' },
    { pid: infra.pids?.nats, signal: 'SIGTERM' },
  ];
  /** @type {Map<string, number>} */
  const servicePids = new Map();
  const recordAll = () => recordChildren([...infraChildren, ...[...servicePids.values()].map((p) => ({ pid: p, signal: /** @type {NodeJS.Signals} */ ('SIGTERM') }))]);
  /** @param {string} name @param {import('./lib/processes.mjs').ExitStatus} status */
  const infraExited = (name, status) => {
    if (stopping) return;
    if (supervisor) return supervisor.exited(name, status);
    log(`${name} ${describeExit(status)} while the platform was starting; stopping the platform`);
    stopping = true;
    void exit(1);
  };
  natsExited = (status) => infraExited(NATS_PROCESS, status);
  postgresExited = (status) => infraExited(POSTGRES_PROCESS, status);
  log('migrating and starting the services');
  const platform = await startPlatform({
    databaseUrl: infra.databaseUrl,
    natsUrl: /** @type {string} */ (infra.natsUrl),
    mode: /** @type {any} */ (process.env.PLATFORM_MODE) || 'development',
    logLevel: process.env.LOG_LEVEL || 'info',
    adminToken: token,
    ports: 'default',
    host: process.env.HOST || '127.0.0.1',
    migrate: true,
    detached: true,
    onSpawn: (name, pid) => {
      servicePids.set(name, pid);
      recordAll();
    },
    onLog: (name, line) => print(name, line),
    onUnexpectedExit: (name, status) => {
      if (stopping) return;
      if (supervisor) return supervisor.exited(name, status);
      log(`${name} ${describeExit(status)} while the platform was starting; stopping the platform`);
      stopping = true;
      void exit(1);
    },
  });
  cleanups.push(platform.stop);
  // From here on a service that dies is restarted with back-off; one that keeps dying right
  // after its start stops the platform.
  supervisor = createSupervisor({
    log,
    start: async (name) => {
      if (name === NATS_PROCESS) {
        await /** @type {NonNullable<typeof infra.nats>} */ (infra.nats).restart();
        infraChildren[1] = { pid: infra.nats?.pid(), signal: 'SIGTERM' };
        return recordAll();
      }
      if (name === POSTGRES_PROCESS) {
        await /** @type {NonNullable<typeof infra.postgres.restart>} */ (infra.postgres.restart)();
        infraChildren[0] = { pid: infra.postgres.currentPid?.(), signal: 'SIGINT' };
        return recordAll();
      }
      return /** @type {NonNullable<typeof platform.processes[string]>} */ (platform.processes[name]).start();
    },
    giveUp: (_name, reason) => {
      if (stopping) return;
      log(`${reason}; stopping the platform`);
      stopping = true;
      void exit(1);
    },
  });
  supervisor.started([...platform.services, ...(infra.nats ? [NATS_PROCESS] : []), ...(infra.postgres.started ? [POSTGRES_PROCESS] : [])]);
  cleanups.push(() => supervisor?.stop());

  onSignal = () => {
    if (stopping) return;
    stopping = true;
    log('stopping');
    void exit(0);
  };

  const lines = platform.services.map((name) => {
    const p = platform.processes[name];
    // The operations listener beside each service's own address: /metrics, /health/live, /health/ready.
    const ops = p?.metricsUrl ? `   metrics ${p.metricsUrl.replace('127.0.0.1', 'localhost')}/metrics` : '';
    return `  ${name.padEnd(18)} ${(p?.address.replace('127.0.0.1', 'localhost') ?? '').padEnd(24)}${ops}`;
  });
  const gateway = platform.gatewayUrl?.replace('127.0.0.1', 'localhost');
  console.log(
    [
      '',
      gateway ? `  Gateway      ${gateway}` : '  Gateway      (not built)',
      // The token itself is never printed (terminals and their captures are logs): where it is.
      `  Admin token  ${process.env.BILLING_ADMIN_TOKEN ? 'BILLING_ADMIN_TOKEN (as given)' : `in ${path.relative(process.cwd(), path.join(DATA_DIR, 'admin-token')) || path.join(DATA_DIR, 'admin-token')}`}`,
      `  Postgres     ${redact(infra.databaseUrl)}`,
      `  NATS         ${infra.natsShown}`,
      '',
      ...lines,
      '',
      '  Ctrl-C stops everything.',
      '',
    ].join('\n'),
  );
}

/**
 * Runs a command with the infrastructure in its environment, forwarding SIGTERM; Ctrl-C
 * reaches it directly from the terminal.
 * @param {string} command
 * @param {string[]} args
 * @param {{ databaseUrl: string, natsUrl?: string, natsBin?: string }} infra
 */
async function runWithInfra(command, args, infra) {
  /** @type {NodeJS.ProcessEnv} */
  const env = { ...process.env, DATABASE_URL: infra.databaseUrl };
  if (infra.natsBin) env.NATS_SERVER_BIN = infra.natsBin;
  if (infra.natsUrl) env.NATS_URL = infra.natsUrl;
  const child = spawn(command, args, { stdio: 'inherit', env, cwd: REPO_ROOT });
  onSignal = (signal) => {
    if (signal !== 'SIGINT') child.kill(signal);
  };
  const code = await new Promise((resolve, reject) => {
    child.once('error', reject);
    child.once('exit', (c, s) => resolve(c ?? 128 + (s ? os.constants.signals[s] : 0)));
  });
  await exit(/** @type {number} */ (code));
}

async function main() {
  const [command, ...args] = process.argv.slice(2);
  switch (command) {
    case 'start':
      return start();
    case 'test': {
      const infra = await bringUp({ withNats: false, fastPostgres: true });
      // The browser tests (tests/e2e/*-page.test.ts, api-docs) drive Chromium; the others do not need it.
      const chromium = findChromium({ install: true, log });
      if (chromium) process.env.CHROMIUM_PATH = chromium;
      else log(CHROMIUM_INSTALL_HINT);
      return runWithInfra(process.platform === 'win32' ? 'npx.cmd' : 'npx', ['vitest', 'run', ...args], infra);
    }
    case 'bench': {
      const script = path.join(REPO_ROOT, 'bench', 'run.mjs');
      if (!fs.existsSync(script)) throw new Error('bench/run.mjs does not exist yet; there is no benchmark to run');
      const infra = await bringUp({ withNats: false, fastPostgres: false });
      return runWithInfra(process.execPath, [script, ...args], infra);
    }
    case undefined:
    case '-h':
    case '--help':
    case 'help':
      console.log(USAGE);
      return exit(command ? 0 : 2);
    default:
      console.error(`unknown command: ${command}\n\n${USAGE}`);
      return exit(2);
  }
}

main().catch(async (e) => {
  console.error(`\nplatform: ${e instanceof Error ? e.message : e}`);
  await exit(1);
});
