import { DomainError, isUuidText } from '@billing/contracts';
import type { Scope, Scope__Output } from '@billing/proto-types/common/v1/Scope';

/** The verified scope of an internal call: one merchant, or the platform operator. */
export type CallScope = { kind: 'merchant'; merchantId: string } | { kind: 'platform' };

/**
 * Decodes `common.v1.Scope`. A missing scope, or a merchant scope without a valid merchant id,
 * is refused: an empty field never means "all merchants".
 */
export function requireScope(scope: Scope__Output | null | undefined): CallScope {
  if (scope?.kind === 'platform' && scope.platform) return { kind: 'platform' };
  if (scope?.kind === 'merchantId' && scope.merchantId && isUuidText(scope.merchantId)) {
    return { kind: 'merchant', merchantId: scope.merchantId.toLowerCase() };
  }
  throw new DomainError('bad_request', 'The call names no scope (a merchant or the platform).');
}

/**
 * Decodes the scope of a call that acts inside one merchant (a create, a list): only a merchant
 * scope. The platform scope names no merchant, so it is refused here rather than read as "every
 * merchant"; the platform acts for a merchant by calling with that merchant's scope.
 */
export function requireMerchantScope(scope: Scope__Output | null | undefined): string {
  const s = requireScope(scope);
  if (s.kind !== 'merchant') throw new DomainError('bad_request', 'This call acts inside one merchant; the platform scope names none.');
  return s.merchantId;
}

/** Decodes the scope of a call only the platform operator may make; a merchant scope is forbidden. */
export function requirePlatformScope(scope: Scope__Output | null | undefined): void {
  if (requireScope(scope).kind !== 'platform') throw new DomainError('forbidden', 'Only the platform may make this call.');
}

/** The `merchantId` condition a scope puts on a query: its merchant's rows, or (platform) none. */
export function merchantFilter(scope: CallScope): { merchantId?: string } {
  return scope.kind === 'merchant' ? { merchantId: scope.merchantId } : {};
}

/**
 * `common.v1.Scope` of one merchant. An empty id is a caller's bug, refused here rather than
 * sent on as if it were the platform.
 */
export function scopeOfMerchant(merchantId: string): Scope {
  if (!merchantId) throw new Error('scopeOfMerchant: no merchant id');
  return { merchantId: merchantId.toLowerCase() };
}

/** `common.v1.Scope` of the platform operator. */
export const PLATFORM_SCOPE: Scope = Object.freeze({ platform: {} });
