import { LockMode, type EntityManager, type EntityName, type FilterQuery } from '@mikro-orm/postgresql';
import { DomainError, isUuidText } from '@billing/contracts';

/**
 * A by-id filter limited to the caller's merchant. An empty `merchantId` is the platform admin,
 * who may address any merchant's resources. Malformed ids are not found rather than a database
 * error.
 */
export function scopedTo<W extends { id: string }>(merchantId: string, where: W): W & { merchantId?: string } {
  if (!isUuidText(where.id)) throw new DomainError('not_found', 'Not found.');
  return merchantId ? { ...where, id: where.id.toLowerCase(), merchantId: merchantId.toLowerCase() } : { ...where, id: where.id.toLowerCase() };
}

/**
 * One of the caller's merchant's entities by id, optionally row-locked for an update. Another
 * merchant's is indistinguishable from a missing one: both are `not_found` saying `<what> not found.`
 */
export async function findScoped<T extends object>(
  em: EntityManager,
  entity: EntityName<T>,
  ref: { merchantId: string; id: string },
  what: string,
  opts: { lock?: boolean } = {},
): Promise<T> {
  const found = await em.findOne(entity, scopedTo(ref.merchantId, { id: ref.id }) as FilterQuery<T>, opts.lock ? { lockMode: LockMode.PESSIMISTIC_WRITE } : {});
  if (!found) throw new DomainError('not_found', `${what} not found.`);
  return found as T;
}
