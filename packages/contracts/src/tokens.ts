/**
 * Bearer-token kinds issued as JWTs. Each kind has its own `aud` and header `typ`, and a
 * verifier accepts exactly one kind, so no token can stand in for another.
 */
export const TOKEN_KINDS = {
  merchantUser: { aud: 'billing:merchant-user', typ: 'merchant-user+jwt', iss: 'billing-platform/identity' },
  customer: { aud: 'billing:customer', typ: 'customer+jwt', iss: 'billing-platform/identity' },
  checkout: { aud: 'billing:checkout', typ: 'checkout+jwt', iss: 'billing-platform/checkout' },
} as const;
export type TokenKind = keyof typeof TOKEN_KINDS;

/** Signature algorithm of every platform JWT; verifiers pin it. */
export const JWT_ALG = 'ES256';

/** Merchant-user access tokens live at most one hour. */
export const MERCHANT_TOKEN_TTL_SECONDS = 3600;

/** Plaintext API keys: `sk_` + 43 base64url characters (32 random bytes). */
export const API_KEY_PATTERN = /^sk_[A-Za-z0-9_-]{43}$/;

/** Checkout-session tokens (from deep-link resolve) live 30 minutes. */
export const CHECKOUT_SESSION_TTL_SECONDS = 1800;
