import type { MerchantRole } from '@billing/contracts';

/** Who is calling, as established from the bearer credential. */
export type Principal =
  | { kind: 'admin' }
  | { kind: 'apiKey'; apiKeyId: string; merchantId: string }
  | { kind: 'merchantUser'; userId: string; merchantId: string; role: MerchantRole }
  | { kind: 'customer'; accountId: string }
  | { kind: 'checkout'; sessionId: string; merchantId: string };

export type PrincipalKind = Principal['kind'];

/** A stable identifier of the credential, for rate limiting and idempotency scoping. */
export function credentialId(p: Principal): string {
  switch (p.kind) {
    case 'admin':
      return 'admin';
    case 'apiKey':
      return `key:${p.apiKeyId}`;
    case 'merchantUser':
      return `user:${p.userId}`;
    case 'customer':
      return `customer:${p.accountId}`;
    case 'checkout':
      return `checkout:${p.sessionId}`;
  }
}

/** The merchant a credential is bound to; undefined for the platform admin and customers. */
export function merchantOf(p: Principal): string | undefined {
  return p.kind === 'apiKey' || p.kind === 'merchantUser' || p.kind === 'checkout' ? p.merchantId : undefined;
}
