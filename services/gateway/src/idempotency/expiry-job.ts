import type { Logger } from '@billing/service-runtime';
import { EXPIRY_BATCH_SIZE, type IdempotencyStore } from './idempotency-store.js';

/**
 * Periodically deletes expired idempotency records, in batches so no statement holds many row
 * locks. Correctness does not depend on it (an expired record is taken over by the next claim);
 * it only keeps the table small. Every replica may run it: rows are taken with SKIP LOCKED.
 */
export function startExpiryJob(store: IdempotencyStore, logger: Logger, intervalMs: number, clock: () => Date = () => new Date()): { stop(): Promise<void> } {
  let running: Promise<void> | undefined;
  const sweep = async () => {
    try {
      let total = 0;
      for (;;) {
        const deleted = await store.deleteExpired(clock());
        total += deleted;
        if (deleted < EXPIRY_BATCH_SIZE) break;
      }
      if (total) logger.info({ deleted: total }, 'expired idempotency records deleted');
    } catch (err) {
      logger.warn({ err }, 'idempotency expiry sweep failed; will retry');
    }
  };
  const timer = setInterval(() => {
    running ??= sweep().finally(() => (running = undefined));
  }, intervalMs);
  timer.unref();
  return {
    stop: async () => {
      clearInterval(timer);
      await running;
    },
  };
}
