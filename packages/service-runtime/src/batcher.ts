import { DomainError } from '@billing/contracts';

/**
 * Group commit for hot single-row writes and reads.
 *
 * On this platform's machines every socket round trip (a write to Postgres and its answer) costs
 * far more than the SQL it carries, so one statement for N concurrent requests instead of N
 * statements is the main lever on throughput. Calls made while a batch is being gathered (the
 * rest of the current event-loop turn) or while `maxInFlight` batches are already running go out
 * together as one `flush`. Every caller still gets its own result only once the statement that
 * carried its item has finished (for an autocommit write: is durable), so callers see exactly
 * the semantics of running their statement alone.
 *
 * If a batch fails as a whole (one bad row fails the statement, which then wrote nothing) its
 * items are retried one by one, so one item's failure never becomes its neighbours' failure.
 */
export interface BatcherOptions<I> {
  /** Most items per flush. */
  maxBatch?: number;
  /** Flushes running at once; more calls wait and join the next batch. Default: the process's `setBatchesInFlight` (2). */
  maxInFlight?: number;
  /**
   * Items with equal keys never share a flush, nor run in two flushes at once: a later one waits
   * for the batch in flight with its key to finish, and then sees what it wrote. For statements
   * that may touch a row at most once, such as `INSERT ... ON CONFLICT DO UPDATE`, and for
   * decisions that read before they write (a repeated caller-chosen id must find the row its
   * first request inserted, not race it). An item without a key (undefined) shares a flush with
   * any other.
   */
  keyOf?: (item: I) => string | undefined;
}

let defaultInFlight = 2;

/**
 * Flushes each Batcher without a `maxInFlight` of its own runs at once (`DB_BATCHES_IN_FLIGHT`,
 * set by `openDatabase`; 2 unless set). With 1, the calls that arrive while a batch runs all
 * share the next one: fewer statements per request, but each stage of a chain of batches waits
 * longer. On the writes bench (six runs each way, 2026-11-24) 1 cost the sixteen simple writes
 * 4 % less CPU per request for 5 % more requests per second, and the checkout completion, a
 * chain of about ten batches, 17 % fewer requests per second; so 2 stays the default.
 */
export function setBatchesInFlight(n: number): void {
  if (!Number.isInteger(n) || n < 1) throw new Error(`batches in flight must be a whole number of at least 1, not ${n}`);
  defaultInFlight = n;
}

interface Pending<I, O> {
  item: I;
  resolve: (out: O) => void;
  reject: (err: unknown) => void;
}

export class Batcher<I, O> {
  private queue: Pending<I, O>[] = [];
  private scheduled = false;
  private inFlight = 0;
  /** Keys of the items in the batches in flight (see `keyOf`). */
  private readonly keysInFlight = new Set<string>();
  private readonly maxBatch: number;

  /** `flush` answers one result per item, in the items' order. */
  constructor(
    private readonly flush: (items: I[]) => Promise<O[]>,
    private readonly opts: BatcherOptions<I> = {},
  ) {
    this.maxBatch = opts.maxBatch ?? 200;
  }

  /** Read at each use, so a process's setting applies to the Batchers made before it was set. */
  private get maxInFlight(): number {
    return this.opts.maxInFlight ?? defaultInFlight;
  }

  submit(item: I): Promise<O> {
    return new Promise<O>((resolve, reject) => {
      this.queue.push({ item, resolve, reject });
      this.schedule();
    });
  }

  private schedule(): void {
    if (this.scheduled || this.inFlight >= this.maxInFlight || this.queue.length === 0) return;
    this.scheduled = true;
    // setImmediate, not a microtask: requests whose bytes arrived in the same turn join in.
    setImmediate(() => {
      this.scheduled = false;
      this.drain();
    });
  }

  private drain(): void {
    while (this.inFlight < this.maxInFlight && this.queue.length > 0) {
      const { batch, keys } = this.take();
      // Every queued item waits for a batch in flight with its key; its end drains again.
      if (batch.length === 0) return;
      for (const key of keys) this.keysInFlight.add(key);
      this.inFlight++;
      void this.send(batch).finally(() => {
        for (const key of keys) this.keysInFlight.delete(key);
        this.inFlight--;
        this.schedule();
      });
    }
  }

  /** The next batch: up to maxBatch items in arrival order, no two with the same key, none with the key of a batch in flight. */
  private take(): { batch: Pending<I, O>[]; keys: Set<string> } {
    const { keyOf } = this.opts;
    const keys = new Set<string>();
    if (!keyOf) return { batch: this.queue.splice(0, this.maxBatch), keys };
    const batch: Pending<I, O>[] = [];
    const rest: Pending<I, O>[] = [];
    for (const p of this.queue) {
      const key = keyOf(p.item);
      if (batch.length >= this.maxBatch || (key !== undefined && (keys.has(key) || this.keysInFlight.has(key)))) rest.push(p);
      else {
        if (key !== undefined) keys.add(key);
        batch.push(p);
      }
    }
    this.queue = rest;
    return { batch, keys };
  }

  private async send(batch: Pending<I, O>[]): Promise<void> {
    let outs: O[];
    try {
      outs = await this.flush(batch.map((p) => p.item));
    } catch (err) {
      if (batch.length === 1) batch[0]!.reject(err);
      // The statement wrote nothing; run each item alone so only the bad one fails.
      else await Promise.all(batch.map((p) => this.send([p])));
      return;
    }
    batch.forEach((p, i) => p.resolve(outs[i]!));
  }
}

/** One item's answer within a batch: its value, or the DomainError that refused it. */
export type ItemOutcome<T> = { ok: true; value: T } | { ok: false; error: DomainError };

/**
 * Runs one item's decision inside a batch. A DomainError is that item's answer (the decision
 * throws it before changing anything, so its neighbours go on); any other error propagates and
 * fails the batch, whose items the Batcher then runs again one by one.
 */
export function decideItem<T>(decide: () => T): ItemOutcome<T> {
  try {
    return { ok: true, value: decide() };
  } catch (e) {
    if (!(e instanceof DomainError)) throw e;
    return { ok: false, error: e };
  }
}

/**
 * Each item's row of a batch statement whose rows name their item by `i`, its index in the batch
 * (undefined for an item the statement answered no row).
 */
export function rowsByItem<R extends { i: number }>(items: number, rows: readonly R[]): (R | undefined)[] {
  const found = new Map(rows.map((r) => [r.i, r]));
  return Array.from({ length: items }, (_, i) => found.get(i));
}
