import { existsSync, readFileSync, rmSync } from 'node:fs';
import type { Logger } from './logger.js';

/**
 * Test-only crash points of a multi-step operation: `file` names a step; the next time the
 * operation passes that step, the file is deleted and the process kills itself (SIGKILL, as a
 * crash would: nothing is flushed or released). Without a file (production passes none) every
 * call does nothing.
 */
export function faultInjector(file: string | undefined, logger: Logger, operation: string): (step: string) => void {
  return (step) => {
    if (!file || !existsSync(file) || readFileSync(file, 'utf8').trim() !== step) return;
    rmSync(file, { force: true });
    logger.warn({ step }, `injected fault: killing the process half way through ${operation}`);
    process.kill(process.pid, 'SIGKILL');
  };
}
