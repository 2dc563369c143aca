import { describe, expect, it } from 'vitest';
import { SharedLookups } from './shared-lookups.js';

/** A lookup the test settles by hand, recording when each call started. */
function manualLookups() {
  const calls: { key: string; settle: (v: string) => void; fail: (e: Error) => void }[] = [];
  const lookup = (key: string) => () =>
    new Promise<string>((resolve, reject) => {
      calls.push({ key, settle: resolve, fail: reject });
    });
  return { calls, lookup };
}

const tick = () => new Promise((r) => setImmediate(r));

describe('SharedLookups', () => {
  it('never answers a caller from a lookup started before it arrived; later arrivals share the next one', async () => {
    const shared = new SharedLookups<string>();
    const { calls, lookup } = manualLookups();
    const first = shared.get('k', lookup('k'));
    expect(calls).toHaveLength(1);
    // Arriving while the first lookup is in flight: they wait for a lookup of their own.
    const second = shared.get('k', lookup('k'));
    const third = shared.get('k', lookup('k'));
    expect(calls).toHaveLength(1);
    let secondValue: string | undefined;
    void second.then((v) => (secondValue = v));
    calls[0]!.settle('read before the others arrived');
    expect(await first).toBe('read before the others arrived');
    await tick();
    expect(secondValue).toBeUndefined();
    expect(calls).toHaveLength(2);
    calls[1]!.settle('read after they arrived');
    expect(await second).toBe('read after they arrived');
    expect(await third).toBe('read after they arrived');
    await tick();
    expect(shared.size).toBe(0);
  });

  it('keeps keys apart and fails only the callers of a failed lookup', async () => {
    const shared = new SharedLookups<string>();
    const { calls, lookup } = manualLookups();
    const a = shared.get('a', lookup('a'));
    const b = shared.get('b', lookup('b'));
    expect(calls.map((c) => c.key)).toEqual(['a', 'b']);
    calls[0]!.fail(new Error('a failed'));
    calls[1]!.settle('b');
    await expect(a).rejects.toThrow('a failed');
    expect(await b).toBe('b');
    await tick();
    // Nothing is kept: the next caller of a key that failed asks again.
    const again = shared.get('a', lookup('a'));
    expect(calls).toHaveLength(3);
    calls[2]!.settle('a again');
    expect(await again).toBe('a again');
  });

  it('passes a failure of the waiting group to its callers and then forgets the key', async () => {
    const shared = new SharedLookups<string>();
    const { calls, lookup } = manualLookups();
    const first = shared.get('k', lookup('k'));
    const waiting = shared.get('k', lookup('k'));
    calls[0]!.settle('one');
    await first;
    await tick();
    calls[1]!.fail(new Error('second lookup failed'));
    await expect(waiting).rejects.toThrow('second lookup failed');
    await tick();
    expect(shared.size).toBe(0);
  });

  it('treats a lookup that throws synchronously as a failed lookup', async () => {
    const shared = new SharedLookups<string>();
    await expect(
      shared.get('k', () => {
        throw new Error('thrown before any promise');
      }),
    ).rejects.toThrow('thrown before any promise');
    await tick();
    expect(shared.size).toBe(0);
  });
});
