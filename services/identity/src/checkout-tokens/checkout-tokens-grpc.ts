import { CHECKOUT_SESSION_TTL_SECONDS, DomainError, isUuidText } from '@billing/contracts';
import { requireMerchantScope, type ServiceImpl } from '@billing/service-runtime';
import type { TokenIssuer } from '../signing-keys/token-issuer.js';

/**
 * `identity.v1.CheckoutTokens`: checkout-session JWTs signed with identity's current key. Only
 * the checkout service mints them, after it verified a deep link (identity's caller rules).
 */
export function checkoutTokensGrpc(issuer: TokenIssuer): ServiceImpl<'identity.v1.CheckoutTokens'> {
  return {
    IssueCheckoutToken: async (req) => {
      const mid = requireMerchantScope(req.scope);
      if (!isUuidText(req.sessionId)) throw new DomainError('bad_request', 'sessionId must be a uuid.');
      const sid = req.sessionId.toLowerCase();
      const { token, expiresAt } = await issuer.issue('checkout', sid, { sid, mid, scope: 'checkout' }, CHECKOUT_SESSION_TTL_SECONDS);
      return { token, expiresAt: expiresAt.toISOString() };
    },
  };
}
