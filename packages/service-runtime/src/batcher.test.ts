import { afterEach, describe, expect, it } from 'vitest';
import { Batcher, setBatchesInFlight } from './batcher.js';

/** A flush that records each batch and holds it open until `release` is called. */
function heldFlushes() {
  const batches: number[][] = [];
  const releases: (() => void)[] = [];
  const flush = (items: number[]) =>
    new Promise<number[]>((resolve) => {
      batches.push(items);
      releases.push(() => resolve(items.map((i) => i * 10)));
    });
  return { batches, flush, releaseNext: () => releases.shift()!() };
}

const turn = () => new Promise((r) => setImmediate(r));

describe('Batcher in flight', () => {
  // The default test runs first, before any test changes the process's setting.
  afterEach(() => setBatchesInFlight(2));

  it('runs two at once by default, and a Batcher\'s own limit wins', async () => {
    const shared = heldFlushes();
    const batcher = new Batcher(shared.flush);
    void batcher.submit(1);
    await turn();
    void batcher.submit(2);
    await turn();
    void batcher.submit(3);
    await turn();
    expect(shared.batches).toEqual([[1], [2]]);

    const own = heldFlushes();
    const alone = new Batcher(own.flush, { maxInFlight: 1 });
    void alone.submit(1);
    await turn();
    void alone.submit(2);
    await turn();
    expect(own.batches).toEqual([[1]]);
    expect(() => setBatchesInFlight(0)).toThrow(/at least 1/);
  });

  it('runs one batch at a time when the process sets 1 (DB_BATCHES_IN_FLIGHT): calls arriving meanwhile share the next one', async () => {
    setBatchesInFlight(1);
    const { batches, flush, releaseNext } = heldFlushes();
    const batcher = new Batcher(flush);
    const first = [batcher.submit(1), batcher.submit(2)];
    await turn();
    const later = [batcher.submit(3), batcher.submit(4)];
    await turn();
    await turn();
    batcher.submit(5).catch(() => undefined);
    await turn();
    expect(batches).toEqual([[1, 2]]);
    releaseNext();
    expect(await Promise.all(first)).toEqual([10, 20]);
    await turn();
    expect(batches).toEqual([[1, 2], [3, 4, 5]]);
    releaseNext();
    expect(await Promise.all(later)).toEqual([30, 40]);
  });
});

describe('Batcher keys', () => {
  it('never runs two items with one key at once: the later waits for the batch in flight with its key', async () => {
    const { batches, flush, releaseNext } = heldFlushes();
    const batcher = new Batcher(flush, { keyOf: (i: number) => String(i % 10) });
    const first = batcher.submit(1);
    await turn();
    // Key 1 is in flight: 11 waits, 2 goes out in the second batch beside it.
    const again = batcher.submit(11);
    const other = batcher.submit(2);
    await turn();
    expect(batches).toEqual([[1], [2]]);
    releaseNext();
    expect(await first).toBe(10);
    await turn();
    await turn();
    expect(batches).toEqual([[1], [2], [11]]);
    releaseNext();
    releaseNext();
    expect(await Promise.all([other, again])).toEqual([20, 110]);
  });
});
