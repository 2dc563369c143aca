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

/** `common.v1.Scope` for one merchant, or for the platform when `merchantId` is null. */
export function scopeOf(merchantId: string | null): Scope {
  return merchantId ? { merchantId } : { platform: {} };
}
