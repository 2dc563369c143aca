// Child processes owned by the launcher: spawned with their output split into lines, stopped
// with SIGTERM then SIGKILL, and never left behind when this process exits.
import { spawn } from 'node:child_process';
import { constants } from 'node:os';
import { createInterface } from 'node:readline';

/** @type {Set<ManagedProcess>} */
const LIVE = new Set();

// Last resort for a launcher that exits without stopping its children (an uncaught error, a
// test worker torn down): `exit` handlers must be synchronous, so this can only send signals.
process.on('exit', () => {
  for (const p of LIVE) {
    try {
      process.kill(p.pid, p.exitSignal);
    } catch {
      // already gone
    }
  }
});

/**
 * @typedef {object} SpawnOptions
 * @property {string[]} [args]
 * @property {NodeJS.ProcessEnv} [env]
 * @property {string} [cwd]
 * @property {number} [uid]
 * @property {number} [gid]
 * @property {boolean} [detached] Own process group, so a terminal Ctrl-C reaches only the
 *   launcher, which then stops children in order.
 * @property {NodeJS.Signals} [stopSignal] First signal of `stop()`; default SIGTERM.
 * @property {NodeJS.Signals} [exitSignal] Sent if the launcher exits while this still runs; default SIGKILL.
 * @property {number} [keepLines] How many recent output lines `logs` keeps; default 1000.
 * @property {string[]} [logs] Ring buffer to append to (lets a restarted process keep its history).
 * @property {(line: string, stream: 'stdout' | 'stderr') => void} [onLine]
 */

/**
 * @typedef {object} ExitStatus
 * @property {number | null} code
 * @property {NodeJS.Signals | null} signal
 */

/**
 * @typedef {object} ManagedProcess
 * @property {string} name
 * @property {number} pid
 * @property {string[]} logs Recent output lines, oldest first.
 * @property {NodeJS.Signals} exitSignal
 * @property {() => boolean} running
 * @property {Promise<ExitStatus>} exited Resolves when the process has exited (never rejects).
 * @property {(signal?: NodeJS.Signals) => boolean} kill Sends a signal; false if not running.
 * @property {(graceMs?: number) => Promise<ExitStatus>} stop Stop signal, then SIGKILL after `graceMs`.
 */

/**
 * Spawns `command` and tracks it until it exits.
 * @param {string} name
 * @param {string} command
 * @param {SpawnOptions} [opts]
 * @returns {Promise<ManagedProcess>} resolves once the process has been spawned; rejects when it cannot be (ENOENT, EACCES).
 */
export function spawnProcess(name, command, opts = {}) {
  const child = spawn(command, opts.args ?? [], {
    env: opts.env ?? process.env,
    cwd: opts.cwd,
    uid: opts.uid,
    gid: opts.gid,
    detached: opts.detached ?? false,
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  const keep = opts.keepLines ?? 1000;
  const logs = opts.logs ?? [];
  /** @type {ExitStatus | undefined} */
  let status;
  /** @type {(s: ExitStatus) => void} */
  let settle = () => {};
  /** @type {Promise<ExitStatus>} */
  const exited = new Promise((resolve) => (settle = resolve));

  for (const [stream, source] of /** @type {const} */ ([['stdout', child.stdout], ['stderr', child.stderr]])) {
    createInterface({ input: source, crlfDelay: Infinity }).on('line', (line) => {
      logs.push(line);
      if (logs.length > keep) logs.splice(0, logs.length - keep);
      opts.onLine?.(line, stream);
    });
  }

  return new Promise((resolve, reject) => {
    child.once('error', (err) => {
      if (child.pid === undefined) reject(new Error(`${name}: cannot start ${command}: ${err.message}`));
    });
    child.once('spawn', () => {
      /** @type {ManagedProcess} */
      const handle = {
        name,
        pid: /** @type {number} */ (child.pid),
        logs,
        exitSignal: opts.exitSignal ?? 'SIGKILL',
        running: () => status === undefined,
        exited,
        kill: (signal = 'SIGTERM') => status === undefined && child.kill(signal),
        stop: async (graceMs = 10_000) => {
          if (status) return status;
          child.kill(opts.stopSignal ?? 'SIGTERM');
          const timer = setTimeout(() => child.kill('SIGKILL'), graceMs);
          const s = await exited;
          clearTimeout(timer);
          return s;
        },
      };
      LIVE.add(handle);
      child.once('exit', (code, signal) => {
        status = { code, signal };
        LIVE.delete(handle);
      });
      // 'close' comes after the output streams are drained, so `logs` is complete by then.
      child.once('close', () => settle(/** @type {ExitStatus} */ (status)));
      resolve(handle);
    });
  });
}

/**
 * Runs a command to completion with inherited stdio; resolves with its exit code.
 * @param {string} command
 * @param {string[]} args
 * @param {{ cwd?: string, env?: NodeJS.ProcessEnv }} [opts]
 * @returns {Promise<number>}
 */
export function run(command, args, opts = {}) {
  return new Promise((resolve, reject) => {
    const child = spawn(command, args, { stdio: 'inherit', cwd: opts.cwd, env: opts.env ?? process.env });
    child.once('error', reject);
    child.once('exit', (code, signal) => resolve(code ?? 128 + (signal ? constants.signals[signal] : 0)));
  });
}

/** @param {ExitStatus} s */
export function describeExit(s) {
  return s.signal ? `was killed by ${s.signal}` : `exited with code ${s.code}`;
}

/** @param {number} ms */
export const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

/**
 * Polls `check` until it returns true, the deadline passes, or `abort` resolves.
 * @param {string} what  described in the timeout error
 * @param {() => Promise<boolean>} check
 * @param {{ timeoutMs?: number, intervalMs?: number, abort?: Promise<string> }} [opts]
 *   `abort` resolves with a reason (e.g. "the process exited") to stop waiting early.
 */
export async function waitUntil(what, check, opts = {}) {
  const deadline = Date.now() + (opts.timeoutMs ?? 60_000);
  /** @type {string | undefined} */
  let aborted;
  opts.abort?.then((reason) => (aborted = reason));
  for (;;) {
    if (aborted) throw new Error(`${what}: ${aborted}`);
    if (await check().catch(() => false)) return;
    if (aborted) throw new Error(`${what}: ${aborted}`);
    if (Date.now() > deadline) throw new Error(`timed out after ${opts.timeoutMs ?? 60_000} ms waiting for ${what}`);
    await sleep(opts.intervalMs ?? 150);
  }
}

/**
 * Runs `attempt` until it resolves, at most `retries` + 1 times, `delayMs` apart; rethrows the
 * last failure.
 * @template T
 * @param {() => Promise<T>} attempt
 * @param {number} retries
 * @param {number} delayMs
 * @returns {Promise<T>}
 */
async function retrying(attempt, retries, delayMs) {
  for (let n = 0; ; n++) {
    try {
      return await attempt();
    } catch (e) {
      if (n >= retries) throw e;
      await sleep(delayMs);
    }
  }
}

/**
 * A server that can be started again in place, from `first`: `pid()` of the one running now,
 * `stop()`, and `restart()`, which stops the running one (if any) and calls `launch` again,
 * retried while the OS still holds what the old one had (its port, its shared memory). `onExit`
 * is told when the running one exits of itself (killed, crashed), not when `stop` or `restart`
 * stops it.
 * @param {ManagedProcess} first
 * @param {{ launch: () => Promise<ManagedProcess>, stopMs: number, onExit?: (status: ExitStatus) => void }} opts
 */
export function restartable(first, opts) {
  /** @type {ManagedProcess | undefined} */
  let current = first;
  /** @param {ManagedProcess} proc */
  const watch = (proc) => {
    void proc.exited.then((status) => {
      if (current !== proc) return;
      current = undefined;
      opts.onExit?.(status);
    });
  };
  watch(first);
  const stop = async () => {
    const stopping = current;
    current = undefined;
    await stopping?.stop(opts.stopMs);
  };
  return {
    pid: () => (current?.running() ? current.pid : undefined),
    stop,
    restart: async () => {
      await stop();
      const next = await retrying(opts.launch, 20, 250);
      current = next;
      watch(next);
    },
  };
}
