import { LockMode, type EntityManager, type EntityName, type FilterQuery } from '@mikro-orm/postgresql';
import { distinctUuids, DomainError, isUuidText } from '@billing/contracts';
import { merchantFilter, type CallScope } from '@billing/service-runtime';

/**
 * A by-id filter limited to the call's scope: a merchant scope sees its own merchant's rows
 * only, the platform scope any merchant's. Malformed ids are not found rather than a database
 * error.
 */
export function scopedTo<W extends { id: string }>(scope: CallScope, where: W): W & { merchantId?: string } {
  if (!isUuidText(where.id)) throw new DomainError('not_found', 'Not found.');
  return { ...where, id: where.id.toLowerCase(), ...merchantFilter(scope) };
}

/**
 * One entity of the scope by id, optionally row-locked for an update. Another merchant's is
 * indistinguishable from a missing one: both are `not_found` saying `<what> not found.`
 */
export async function findScoped<T extends object>(
  em: EntityManager,
  entity: EntityName<T>,
  scope: CallScope,
  id: string,
  what: string,
  opts: { lock?: boolean } = {},
): Promise<T> {
  const found = await em.findOne(entity, scopedTo(scope, { id }) as FilterQuery<T>, opts.lock ? { lockMode: LockMode.PESSIMISTIC_WRITE } : {});
  if (!found) throw new DomainError('not_found', `${what} not found.`);
  return found as T;
}

/**
 * The entities with these ids, for a batch of requests, by lower-cased id; optionally
 * row-locked, in id order so that concurrent batches cannot deadlock. Malformed ids find nothing.
 */
export async function findManyById<T extends { id: string }>(em: EntityManager, entity: EntityName<T>, ids: readonly string[], opts: { lock?: boolean } = {}): Promise<Map<string, T>> {
  const wanted = distinctUuids(ids);
  if (wanted.length === 0) return new Map();
  const found = await em.find(entity, { id: { $in: wanted } } as unknown as FilterQuery<T>, {
    orderBy: { id: 'asc' } as never,
    ...(opts.lock ? { lockMode: LockMode.PESSIMISTIC_WRITE } : {}),
  });
  return new Map(found.map((e) => [e.id, e]));
}

/** `findScoped` over what `findManyById` loaded: another merchant's entity is `not_found` too. */
export function pickScoped<T extends { id: string; merchantId: string }>(loaded: Map<string, T>, scope: CallScope, id: string, what: string): T {
  const found = isUuidText(id) ? loaded.get(id.toLowerCase()) : undefined;
  if (!found || (scope.kind === 'merchant' && found.merchantId !== scope.merchantId)) throw new DomainError('not_found', `${what} not found.`);
  return found;
}
