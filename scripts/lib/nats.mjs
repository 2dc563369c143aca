// NATS with JetStream for development and tests: the server in NATS_URL, or a nats-server
// process with its own store directory.
import { randomBytes } from 'node:crypto';
import fs from 'node:fs';
import path from 'node:path';
import { findFreePort } from './ports.mjs';
import { findSystemBinary } from './system-binary.mjs';
import { describeExit, restartable, sleep, spawnProcess, waitUntil } from './processes.mjs';

const SEARCH_DIRS = ['/usr/sbin', '/usr/local/bin', '/usr/bin', '/usr/local/sbin', '/opt/homebrew/bin'];

export const NATS_INSTALL_HINT = [
  'nats-server was not found. Either:',
  '  - install it: apt-get install nats-server (Debian/Ubuntu), brew install nats-server (macOS),',
  '    or download a release from https://github.com/nats-io/nats-server/releases and put it on PATH;',
  '  - or point NATS_SERVER_BIN at the binary;',
  '  - or set NATS_URL to a running NATS server with JetStream enabled (nats-server -js).',
].join('\n');

/**
 * Path of the nats-server binary: NATS_SERVER_BIN, PATH, or the usual system directories.
 * With `install`, when running as root on a system with apt-get, installs the Debian package
 * if nothing is found.
 * @param {{ install?: boolean, log?: (msg: string) => void }} [opts]
 * @returns {string | undefined}
 */
export function findNatsServer(opts = {}) {
  return findSystemBinary({ envVar: 'NATS_SERVER_BIN', names: ['nats-server'], dirs: SEARCH_DIRS, aptPackage: 'nats-server', reason: 'NATS with JetStream', ...opts });
}

/**
 * @typedef {object} NatsServer
 * @property {string} url Address with the credentials (`nats://platform:<password>@127.0.0.1:<port>`): what clients are given as NATS_URL.
 * @property {string} address Address without credentials (`nats://127.0.0.1:<port>`), to print, or to show that it refuses a client without them.
 * @property {number} port
 * @property {string} storeDir
 * @property {string[]} logs
 * @property {() => number | undefined} pid
 * @property {() => Promise<void>} stop
 * @property {() => Promise<void>} restart Stops and starts again on the same port and store directory.
 */

/**
 * @typedef {object} NatsServerOptions
 * @property {string} bin Path of nats-server.
 * @property {string} storeDir JetStream store directory; created if missing.
 * @property {number} [port] Exact port; otherwise `preferredPort` if free, or any free port.
 * @property {number} [preferredPort]
 * @property {boolean} [detached] Own process group (see processes.mjs).
 * @property {(line: string) => void} [onLine]
 * @property {(status: import('./processes.mjs').ExitStatus) => void} [onExit] Called when the
 *   server exits of itself (killed, crashed), not when `stop` or `restart` stops it; `restart`
 *   starts it again.
 */

/** User name clients of a server started here authenticate as. */
export const NATS_USER = 'platform';

/**
 * Starts `nats-server -js` on 127.0.0.1 and waits until it is ready. It requires a user and
 * password (user `platform`, a password of 32 random bytes made for this server, kept across
 * `restart`): anything else on the machine can reach the port, and NATS carries every event.
 * The password is in a configuration file readable by its owner only (`auth.conf` in the store
 * directory), not on the command line, where `ps` would show it.
 * @param {NatsServerOptions} opts
 * @returns {Promise<NatsServer>}
 */
export async function startNatsServer(opts) {
  fs.mkdirSync(opts.storeDir, { recursive: true });
  const password = randomBytes(32).toString('hex');
  const configFile = path.join(opts.storeDir, 'auth.conf');
  fs.rmSync(configFile, { force: true });
  fs.writeFileSync(configFile, `authorization {\n  user: "${NATS_USER}"\n  password: "${password}"\n}\n`, { mode: 0o600 });
  /** @type {string[]} */
  const logs = [];
  /** @param {number} port */
  const launch = async (port) => {
    const proc = await spawnProcess('nats-server', opts.bin, {
      args: ['-c', configFile, '-js', '-sd', opts.storeDir, '-a', '127.0.0.1', '-p', String(port), '-n', `billing-platform-${port}`],
      detached: opts.detached,
      exitSignal: 'SIGTERM',
      logs,
      onLine: opts.onLine,
    });
    const from = logs.length;
    try {
      await waitUntil('nats-server to be ready', async () => logs.slice(from).some((l) => l.includes('Server is ready')), {
        timeoutMs: 30_000,
        abort: proc.exited.then((s) => `nats-server ${describeExit(s)}:\n${logs.slice(-20).join('\n')}`),
      });
      return proc;
    } catch (e) {
      await proc.stop(5000);
      throw e;
    }
  };

  let port = opts.port ?? (await findFreePort(opts.preferredPort));
  let proc;
  for (let attempt = 0; !proc; attempt++) {
    try {
      proc = await launch(port);
    } catch (e) {
      const portTaken = logs.some((l) => /address already in use/i.test(l));
      if (opts.port !== undefined || !portTaken || attempt >= 3) throw e;
      await sleep(100);
      port = await findFreePort();
    }
  }
  // Restarted on its port (the OS may hold it briefly after the old server closed it).
  const server = restartable(proc, { launch: () => launch(port), stopMs: 10_000, onExit: opts.onExit });
  return {
    url: `nats://${NATS_USER}:${password}@127.0.0.1:${port}`,
    address: `nats://127.0.0.1:${port}`,
    port,
    storeDir: opts.storeDir,
    logs,
    pid: server.pid,
    stop: server.stop,
    restart: server.restart,
  };
}

/**
 * `NATS_URL` with every password or token replaced by `***`, to print.
 * @param {string} url
 */
export function redactNatsUrl(url) {
  return url
    .split(',')
    .map((server) => server.replace(/^([a-z][a-z0-9+.-]*:\/\/)?(?:([^:@]*):)?.*@/i, (_m, scheme = '', user) => `${scheme}${user === undefined ? '' : `${user}:`}***@`))
    .join(',');
}
