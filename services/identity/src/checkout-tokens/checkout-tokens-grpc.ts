import { CHECKOUT_SESSION_TTL_SECONDS, DomainError, isUuidText } from '@billing/contracts';
import type { ServiceImpl } from '@billing/service-runtime';
import { INTERNAL_CALLER_KEY } from '../api-keys/webhook-signing-grpc.js';
import type { TokenIssuer } from '../signing-keys/token-issuer.js';

/** Only the checkout service mints checkout-session tokens (after it verified a deep link). */
const ALLOWED_CALLERS = new Set(['checkout']);

/** `identity.v1.CheckoutTokens`: checkout-session JWTs signed with identity's current key. */
export function checkoutTokensGrpc(issuer: TokenIssuer): ServiceImpl<'identity.v1.CheckoutTokens'> {
  return {
    IssueCheckoutToken: async (req, call) => {
      const caller = call.metadata.get(INTERNAL_CALLER_KEY)[0]?.toString();
      if (!caller || !ALLOWED_CALLERS.has(caller)) throw new DomainError('forbidden', 'Internal callers only.');
      if (!isUuidText(req.sessionId) || !isUuidText(req.merchantId)) throw new DomainError('bad_request', 'sessionId and merchantId must be uuids.');
      const sid = req.sessionId.toLowerCase();
      const { token, expiresAt } = await issuer.issue('checkout', sid, { sid, mid: req.merchantId.toLowerCase(), scope: 'checkout' }, CHECKOUT_SESSION_TTL_SECONDS);
      return { token, expiresAt: expiresAt.toISOString() };
    },
  };
}
