import type { EntityManager, MikroORM } from '@mikro-orm/postgresql';
import { DomainError } from '@billing/contracts';
import { context, type Context } from '@billing/telemetry';
import { Batcher, type BatcherOptions } from './batcher.js';

/**
 * One write use case run for many requests at once: `load` reads what the whole batch needs,
 * then `apply` decides each item against it. Both run in one transaction per batch.
 */
export interface GroupWriteSpec<I, L, O> {
  /**
   * Reads (and row-locks, where the decision depends on a row staying as read) what deciding
   * the batch needs: one query per kind of row for the whole batch, never one per item. Rows to
   * lock are locked in id order, so concurrent batches cannot deadlock.
   */
  load: (em: EntityManager, items: readonly I[]) => Promise<L>;
  /**
   * Decides one item: persists or changes entities in `em`, records its outbox events, and
   * answers. Refuses with a DomainError, which fails that item alone; it must throw before it
   * changes or persists anything (aggregates guard their transitions before changing state).
   * Runs in the trace context of the item's own request, so its events carry that trace.
   */
  apply: (em: EntityManager, item: I, loaded: L) => O | Promise<O>;
}

type Settled<O> = { ok: true; value: O } | { ok: false; error: DomainError };

interface Submitted<I> {
  item: I;
  ctx: Context;
}

/**
 * Group commit for writes made through the ORM: the requests that arrive together (see
 * `Batcher`) share one transaction, so the batch costs one BEGIN, one read per kind of row, one
 * multi-row statement per table written (the ORM batches a flush's inserts and updates) and one
 * COMMIT, where running them one by one costs all of that per request. Each caller gets its
 * answer once the transaction holding its writes has committed.
 *
 * A DomainError from `apply` is that item's answer and writes nothing of it; the rest of the
 * batch commits. Any other failure (a unique or foreign-key violation at flush, a lost
 * connection) rolls the batch back and runs its items again one per transaction, so only the
 * item that causes it fails, with the same error it would have met alone.
 */
export class GroupWrite<I, O> {
  private readonly batcher: Batcher<Submitted<I>, Settled<O>>;

  constructor(orm: MikroORM, spec: GroupWriteSpec<I, any, O>, opts: BatcherOptions<I> = {}) {
    const { keyOf, ...rest } = opts;
    this.batcher = new Batcher<Submitted<I>, Settled<O>>(
      (batch) =>
        orm.em.fork().transactional(async (em) => {
          const loaded = await spec.load(em, batch.map((b) => b.item));
          const out: Settled<O>[] = [];
          for (const { item, ctx } of batch) {
            try {
              out.push({ ok: true, value: await context.with(ctx, () => spec.apply(em, item, loaded)) });
            } catch (e) {
              if (!(e instanceof DomainError)) throw e;
              out.push({ ok: false, error: e });
            }
          }
          return out;
        }),
      { ...rest, ...(keyOf ? { keyOf: (s: Submitted<I>) => keyOf(s.item) } : {}) },
    );
  }

  /** Runs `item` in the next batch; answers what `apply` answered for it, or throws its error. */
  async run(item: I): Promise<O> {
    const settled = await this.batcher.submit({ item, ctx: context.active() });
    if (!settled.ok) throw settled.error;
    return settled.value;
  }
}
