import { describe, expect, it } from 'vitest';
import { DomainError } from '@billing/contracts';
import { PaymentMethod } from './payment-method.js';
import { byRank, nextRank, rerank } from './ranking.js';

function methods(n: number): PaymentMethod[] {
  return Array.from({ length: n }, (_, i) =>
    PaymentMethod.create({ merchantId: 'm', memberId: 'mem', rank: i + 1, type: 'Card', brand: 'Visa', last4: `000${i}`, expiryMonth: 12, expiryYear: 2099, accountName: null, bsb: null }),
  );
}

function orderedIdsErrors(fn: () => unknown): string[] | undefined {
  try {
    fn();
  } catch (e) {
    if (e instanceof DomainError && e.code === 'validation_failed') return e.extensions.errors?.orderedIds;
    throw e;
  }
  return undefined;
}

describe('rerank', () => {
  it('ranks methods in the given order; the first becomes the default', () => {
    const [a, b, c] = methods(3) as [PaymentMethod, PaymentMethod, PaymentMethod];
    const ordered = rerank([a, b, c], [c.id, a.id, b.id]);
    expect(ordered).toEqual([c, a, b]);
    expect([c.rank, a.rank, b.rank]).toEqual([1, 2, 3]);
    expect(c.toMessage().isDefault).toBe(true);
    expect(a.toMessage().isDefault).toBe(false);
    expect(byRank([a, b, c])).toEqual([c, a, b]);
  });

  it('refuses a list with a method missing, and changes nothing', () => {
    const [a, b, c] = methods(3) as [PaymentMethod, PaymentMethod, PaymentMethod];
    expect(orderedIdsErrors(() => rerank([a, b, c], [c.id, a.id]))).toHaveLength(1);
    expect([a.rank, b.rank, c.rank]).toEqual([1, 2, 3]);
  });

  it('refuses extra and duplicate ids', () => {
    const [a, b] = methods(2) as [PaymentMethod, PaymentMethod];
    const other = methods(1)[0]!;
    expect(orderedIdsErrors(() => rerank([a, b], [a.id, b.id, other.id]))).toHaveLength(1);
    expect(orderedIdsErrors(() => rerank([a, b], [a.id, b.id, a.id]))).toHaveLength(1);
    expect(orderedIdsErrors(() => rerank([a, b], [a.id, a.id]))).toHaveLength(2); // duplicate, and b missing
  });

  it('accepts an empty list for a member without methods', () => {
    expect(rerank([], [])).toEqual([]);
  });

  it('matches ids case-insensitively', () => {
    const [a, b] = methods(2) as [PaymentMethod, PaymentMethod];
    rerank([a, b], [b.id.toUpperCase(), a.id]);
    expect(b.rank).toBe(1);
  });
});

describe('nextRank', () => {
  it('appends after the lowest priority', () => {
    expect(nextRank([])).toBe(1);
    expect(nextRank(methods(3))).toBe(4);
  });
});
