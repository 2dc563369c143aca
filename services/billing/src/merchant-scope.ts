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
