interface Waiting<V> {
  promise: Promise<V>;
  resolve: (value: V) => void;
  reject: (reason: unknown) => void;
  lookup: () => Promise<V>;
}

interface Slot<V> {
  /** The callers that arrived while the running lookup was in flight, sharing the next one. */
  waiting?: Waiting<V>;
}

/**
 * Coalesces identical lookups (reads between services that many concurrent requests make alike,
 * e.g. every checkout link of one API key asks for its signing key) without answering anyone
 * from a read older than its own arrival. The first caller of a key starts a lookup. Callers of
 * that key arriving while it is in flight do not join it (it may have read before they arrived),
 * but wait for it to end and then share one lookup started for all of them; so a key has at most
 * one lookup running and one group waiting, and under load a burst of N identical reads costs two.
 * Nothing is kept once a key's lookups are done, and a failed lookup fails only its own callers.
 * The key must stand for everything the lookup asks (scope included): the first waiter's
 * `lookup` serves its whole group.
 */
export class SharedLookups<V> {
  private readonly slots = new Map<string, Slot<V>>();

  get(key: string, lookup: () => Promise<V>): Promise<V> {
    const slot = this.slots.get(key);
    if (!slot) return this.start(key, {}, lookup);
    if (slot.waiting) return slot.waiting.promise;
    let resolve!: (value: V) => void;
    let reject!: (reason: unknown) => void;
    const promise = new Promise<V>((res, rej) => {
      resolve = res;
      reject = rej;
    });
    slot.waiting = { promise, resolve, reject, lookup };
    return promise;
  }

  /** Keys with a lookup in flight (for tests and metrics). */
  get size(): number {
    return this.slots.size;
  }

  private start(key: string, slot: Slot<V>, lookup: () => Promise<V>): Promise<V> {
    this.slots.set(key, slot);
    let running: Promise<V>;
    try {
      running = lookup();
    } catch (e) {
      running = Promise.reject(e);
    }
    const next = () => {
      const waiting = slot.waiting;
      if (!waiting) {
        this.slots.delete(key);
        return;
      }
      slot.waiting = undefined;
      this.start(key, slot, waiting.lookup).then(waiting.resolve, waiting.reject);
    };
    running.then(next, next);
    return running;
  }
}

/**
 * The value of a settled promise, or its reason thrown: for lookups made at once with
 * `Promise.allSettled` (so none is left to reject unhandled) and judged one after another.
 */
export function settledValue<T>(result: PromiseSettledResult<T>): T {
  if (result.status === 'rejected') throw result.reason;
  return result.value;
}
