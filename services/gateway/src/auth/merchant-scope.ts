import type { MerchantAccess } from './access.js';
import { merchantOf, type Principal } from './principal.js';

/**
 * The merchant scope a backing service should apply to a request addressing resources by id:
 * the merchant named in the body when there is one (after the 403/404 merchant check), else the
 * credential's own merchant, or '' for the platform admin (any merchant).
 */
export async function merchantScope(access: MerchantAccess, principal: Principal, named?: string | null): Promise<string> {
  return named ? access.resolve(principal, named) : (merchantOf(principal) ?? '');
}
