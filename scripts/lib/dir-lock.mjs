// Exclusive use of a state directory (.data/postgres, .data/nats) by one launcher at a time.
import { linkSync, readFileSync, rmSync, writeFileSync } from 'node:fs';

/** @param {number} pid */
export function isAlive(pid) {
  try {
    process.kill(pid, 0);
    return true;
  } catch (e) {
    return /** @type {NodeJS.ErrnoException} */ (e).code === 'EPERM';
  }
}

/**
 * Takes `<dir>.lock`, which holds the owner's pid. A lock left by a process that no longer
 * exists is taken over.
 * @param {string} dir
 * @returns {{ release(): void } | { heldByPid: number }}
 */
export function lockDir(dir) {
  const file = `${dir}.lock`;
  const tmp = `${file}.${process.pid}`;
  // Written aside and hard-linked into place, so the lock never exists without its pid.
  writeFileSync(tmp, String(process.pid));
  try {
    for (let attempt = 0; attempt < 5; attempt++) {
      try {
        linkSync(tmp, file);
      } catch (e) {
        if (/** @type {NodeJS.ErrnoException} */ (e).code !== 'EEXIST') throw e;
        const pid = Number.parseInt(readFileSync(file, 'utf8'), 10);
        if (pid && pid !== process.pid && isAlive(pid)) return { heldByPid: pid };
        rmSync(file, { force: true });
        continue;
      }
      let released = false;
      const release = () => {
        if (released) return;
        released = true;
        rmSync(file, { force: true });
        process.off('exit', release);
      };
      process.on('exit', release);
      return { release };
    }
    throw new Error(`could not lock ${dir}`);
  } finally {
    rmSync(tmp, { force: true });
  }
}
