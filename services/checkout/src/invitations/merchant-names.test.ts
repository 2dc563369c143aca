import { describe, expect, it } from 'vitest';
import { DomainError } from '@billing/contracts';
import { MERCHANT_NAMES_MAX, MerchantNames } from './merchant-names.js';

/** A lookup whose answers the test releases, counting the calls made per merchant. */
function controlledLookup() {
  const calls: string[] = [];
  const waiting: { merchantId: string; resolve: (name: string) => void; reject: (e: unknown) => void }[] = [];
  const lookup = (merchantId: string) => {
    calls.push(merchantId);
    return new Promise<string>((resolve, reject) => waiting.push({ merchantId, resolve, reject }));
  };
  return { calls, waiting, lookup };
}

/** A lookup that answers at once with the merchant's current name. */
function namesLookup(names: Map<string, string>) {
  const calls: string[] = [];
  const lookup = async (merchantId: string) => {
    calls.push(merchantId);
    return names.get(merchantId) ?? 'unknown';
  };
  return { calls, lookup };
}

describe('MerchantNames', () => {
  it('reuses a name for ttlMs after its lookup started, then reads the new name', async () => {
    let now = 1_000;
    const names = new Map([['m1', 'Old Name']]);
    const { calls, lookup } = namesLookup(names);
    const cache = new MerchantNames(lookup, 5_000, () => now);

    expect(await cache.nameOf('m1')).toBe('Old Name');
    names.set('m1', 'New Name');
    now += 4_999;
    expect(await cache.nameOf('m1')).toBe('Old Name');
    expect(calls).toHaveLength(1);
    now += 1;
    expect(await cache.nameOf('m1')).toBe('New Name');
    expect(calls).toHaveLength(2);
  });

  it('keeps each merchant apart', async () => {
    const names = new Map([['m1', 'One'], ['m2', 'Two']]);
    const { calls, lookup } = namesLookup(names);
    const cache = new MerchantNames(lookup, 5_000, () => 0);
    expect(await Promise.all([cache.nameOf('m1'), cache.nameOf('m2'), cache.nameOf('m1')])).toEqual(['One', 'Two', 'One']);
    expect(calls.sort()).toEqual(['m1', 'm2']);
  });

  it('shares one lookup between concurrent misses for one merchant', async () => {
    const { calls, waiting, lookup } = controlledLookup();
    const cache = new MerchantNames(lookup, 5_000, () => 0);
    const answers = Promise.all(Array.from({ length: 10 }, () => cache.nameOf('m1')));
    expect(calls).toEqual(['m1']);
    waiting[0]!.resolve('Shared');
    expect(await answers).toEqual(Array(10).fill('Shared'));
  });

  it('with ttlMs 0 asks every time, also for concurrent calls', async () => {
    const names = new Map([['m1', 'Name']]);
    const { calls, lookup } = namesLookup(names);
    const cache = new MerchantNames(lookup, 0, () => 0);
    await Promise.all([cache.nameOf('m1'), cache.nameOf('m1')]);
    await cache.nameOf('m1');
    expect(calls).toHaveLength(3);
  });

  it('does not keep a failure: every caller of the failed lookup sees it, the next caller asks again', async () => {
    const { calls, waiting, lookup } = controlledLookup();
    const cache = new MerchantNames(lookup, 5_000, () => 0);
    const failed = [cache.nameOf('m1'), cache.nameOf('m1')];
    const notFound = new DomainError('merchant_not_found', 'Merchant not found.', { outcome: 'MerchantNotFound' });
    waiting[0]!.reject(notFound);
    for (const p of failed) await expect(p).rejects.toBe(notFound);
    expect(calls).toHaveLength(1);

    const retried = cache.nameOf('m1');
    expect(calls).toHaveLength(2);
    waiting[1]!.resolve('Found');
    expect(await retried).toBe('Found');
  });

  it('keeps at most MERCHANT_NAMES_MAX merchants, dropping the oldest', async () => {
    const { calls, lookup } = namesLookup(new Map());
    const cache = new MerchantNames(lookup, 5_000, () => 0);
    for (let i = 0; i <= MERCHANT_NAMES_MAX; i++) await cache.nameOf(`m${i}`);
    expect(calls).toHaveLength(MERCHANT_NAMES_MAX + 1);
    await cache.nameOf(`m${MERCHANT_NAMES_MAX}`);
    expect(calls).toHaveLength(MERCHANT_NAMES_MAX + 1);
    await cache.nameOf('m0');
    expect(calls).toHaveLength(MERCHANT_NAMES_MAX + 2);
  });
});
