import { DomainError } from '@billing/contracts';
import type { PaymentMethod } from './payment-method.js';

/** Rank of a method added after `existing`: the lowest priority. */
export function nextRank(existing: ReadonlyArray<Pick<PaymentMethod, 'rank'>>): number {
  return existing.reduce((max, m) => Math.max(max, m.rank), 0) + 1;
}

/**
 * Re-ranks a member's methods to the order of `orderedIds`, which must be exactly the set of
 * their ids (none missing, none extra, none twice); the first becomes rank 1, the default.
 * Returns the methods in their new order. Nothing changes when the list is refused.
 */
export function rerank<M extends Pick<PaymentMethod, 'id' | 'rank' | 'updatedAt'>>(methods: M[], orderedIds: readonly string[], now = new Date()): M[] {
  const byId = new Map(methods.map((m) => [m.id.toLowerCase(), m]));
  const seen = new Set<string>();
  const problems: string[] = [];
  for (const raw of orderedIds) {
    const id = raw.toLowerCase();
    if (seen.has(id)) problems.push(`${raw} is listed more than once.`);
    else if (!byId.has(id)) problems.push(`${raw} is not one of the member's payment methods.`);
    seen.add(id);
  }
  const missing = methods.filter((m) => !seen.has(m.id.toLowerCase()));
  for (const m of missing) problems.push(`${m.id} is missing; send every payment method of the member.`);
  if (problems.length) throw DomainError.validation({ orderedIds: problems }, "orderedIds must list each of the member's payment methods exactly once.");
  const ordered = orderedIds.map((id) => byId.get(id.toLowerCase())!);
  ordered.forEach((m, i) => {
    if (m.rank !== i + 1) {
      m.rank = i + 1;
      m.updatedAt = now;
    }
  });
  return ordered;
}

export function byRank<M extends Pick<PaymentMethod, 'rank'>>(methods: M[]): M[] {
  return [...methods].sort((a, b) => a.rank - b.rank);
}
