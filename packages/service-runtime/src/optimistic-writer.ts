import type { MikroORM } from '@mikro-orm/postgresql';
import { Batcher } from './batcher.js';
import { pooledQuery, transactPrepared, type PreparedQuery } from './database.js';

/** An attempt's answer for an item whose rows another writer changed between its read and its write: decided again. */
export const LOST = Object.freeze({ lost: true as const });
export type Lost = typeof LOST;

/** Optimistic attempts of an item before it is decided under its rows' locks, so it ends even on rows that keep changing. */
export const OPTIMISTIC_ATTEMPTS = 5;

/**
 * Optimistic, group-committed writes: the items that arrive together share one attempt
 * (`Batcher`; items with equal keys never share one). An attempt without `lock` runs on the
 * pool outside a transaction (a read without locks, then a compare-and-swap write, each one
 * autocommit statement) and answers `LOST` for each item whose write lost to a concurrent
 * writer; such an item is tried again on a fresh read in a later batch. After
 * `optimisticAttempts` lost attempts it is tried with `lock`, in one transaction
 * (`transactPrepared`), where the attempt takes its rows' locks and cannot lose; a batch holding
 * such an item (rare) decides all of its items under theirs. `optimisticAttempts` 0 decides every
 * item under its locks, as tests of that path do. An attempt's failure fails its batch, whose
 * items run again one by one (`Batcher`).
 */
export function optimisticWriter<I, O>(
  orm: MikroORM,
  attempt: (query: PreparedQuery, batch: readonly I[], opts: { lock: boolean }) => Promise<(O | Lost)[]>,
  opts: { keyOf?: (item: I) => string | undefined; optimisticAttempts?: number } = {},
): (item: I) => Promise<O> {
  const optimisticAttempts = opts.optimisticAttempts ?? OPTIMISTIC_ATTEMPTS;
  const { keyOf } = opts;
  const attempts = new Batcher<{ item: I; lock: boolean }, O | Lost>(
    (batch) => {
      const items = batch.map((b) => b.item);
      return batch.some((b) => b.lock) ? transactPrepared(orm, (query) => attempt(query, items, { lock: true })) : attempt(pooledQuery(orm), items, { lock: false });
    },
    { keyOf: keyOf && ((b) => keyOf(b.item)) },
  );
  return async (item) => {
    for (let n = 1; ; n++) {
      const outcome = await attempts.submit({ item, lock: n > optimisticAttempts });
      if (outcome !== LOST) return outcome as O;
    }
  };
}
