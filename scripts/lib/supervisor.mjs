// Keeps `npm start`'s services running: one that dies is started again after a back-off, and
// one that keeps dying right after its start gives up on the platform.
import { describeExit } from './processes.mjs';

/**
 * @typedef {object} SupervisorOptions
 * @property {(line: string) => void} log
 * @property {(name: string) => Promise<void>} start Starts the service again; resolves once healthy.
 * @property {(name: string, reason: string) => void} giveUp Called once a service has failed too often.
 * @property {number} [maxQuickFailures] Failures within `stableMs` of a start tolerated in a row; default 5.
 * @property {number} [stableMs] A service up this long has recovered: its back-off starts over. Default 30 s.
 * @property {number} [baseDelayMs] First back-off; doubled per quick failure. Default 500 ms.
 * @property {number} [maxDelayMs] Longest back-off; default 15 s.
 */

/** @param {SupervisorOptions} opts */
export function createSupervisor(opts) {
  const maxQuick = opts.maxQuickFailures ?? 5;
  const stableMs = opts.stableMs ?? 30_000;
  const base = opts.baseDelayMs ?? 500;
  const maxDelay = opts.maxDelayMs ?? 15_000;
  /** @type {Map<string, { startedAt: number, quickFailures: number }>} */
  const state = new Map();
  let stopped = false;

  /** @param {string} name */
  const entry = (name) => {
    let s = state.get(name);
    if (!s) state.set(name, (s = { startedAt: Date.now(), quickFailures: 0 }));
    return s;
  };

  /**
   * @param {string} name
   * @param {string} what how it failed
   */
  function failed(name, what) {
    if (stopped) return;
    const s = entry(name);
    s.quickFailures = Date.now() - s.startedAt < stableMs ? s.quickFailures + 1 : 1;
    if (s.quickFailures > maxQuick) {
      stopped = true;
      opts.giveUp(name, `${name} ${what}, ${s.quickFailures} times in a row within ${stableMs / 1000} s of starting`);
      return;
    }
    const delay = Math.min(base * 2 ** (s.quickFailures - 1), maxDelay);
    opts.log(`${name} ${what}; restarting it in ${delay} ms (restart ${s.quickFailures} of at most ${maxQuick} in a row)`);
    setTimeout(() => {
      if (stopped) return;
      s.startedAt = Date.now();
      opts.start(name).then(
        () => opts.log(`${name} restarted and healthy`),
        (e) => failed(name, `did not start again (${String(e?.message ?? e).split('\n')[0]})`),
      );
    }, delay);
  }

  return {
    /** Every service is up: their clocks start now. @param {string[]} names */
    started(names) {
      for (const n of names) entry(n).startedAt = Date.now();
    },
    /** @param {string} name @param {import('./processes.mjs').ExitStatus} status */
    exited(name, status) {
      failed(name, describeExit(status));
    },
    stop() {
      stopped = true;
    },
  };
}
