import { DomainError } from '@billing/contracts';
import type { Scope } from '@billing/proto-types/common/v1/Scope';
import { PLATFORM_SCOPE, scopeOfMerchant } from '@billing/service-runtime';
import type { MerchantAccess } from './access.js';
import { merchantOf, type Principal } from './principal.js';

/**
 * The one place the gateway turns a verified credential into the `common.v1.Scope` of the
 * internal calls it makes for a request; every backend call carries one of these two.
 *
 * `callScope` is for calls addressing resources by id: a merchant named in the request (body or
 * query) after the 403/404 check of `MerchantAccess`, else the credential's own merchant (API
 * key, merchant user, checkout session), else, for the platform admin only, the platform scope
 * (any merchant). A customer credential has no merchant scope.
 */
export async function callScope(access: MerchantAccess, principal: Principal, named?: string | null): Promise<Scope> {
  return named ? scopeOfMerchant(await access.resolve(principal, named)) : credentialScope(principal);
}

/** The scope of the credential itself: its merchant, or the platform for the platform admin. */
export function credentialScope(principal: Principal): Scope {
  const own = merchantOf(principal);
  if (own) return scopeOfMerchant(own);
  if (principal.kind === 'admin') return PLATFORM_SCOPE;
  throw new DomainError('forbidden', 'This credential acts for no merchant.');
}

/**
 * `merchantCallScope` is for calls acting inside one merchant (creates, lists): the merchant
 * named, or the credential's own; the platform admin acts for the merchant it names and must
 * name one (400 naming merchantId), never for "every merchant".
 */
export async function merchantCallScope(access: MerchantAccess, principal: Principal, named?: string | null): Promise<Scope> {
  return scopeOfMerchant(await access.resolve(principal, named ?? undefined));
}
