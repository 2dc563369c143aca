import { decodeProtectedHeader, type JWTPayload } from 'jose';
import { API_KEY_PATTERN, DomainError, MERCHANT_ROLES, TOKEN_KINDS, type MerchantRole, type TokenKind } from '@billing/contracts';
import { constantTimeEqual } from '@billing/service-runtime';
import type { ApiKeyCache } from './api-key-cache.js';
import type { CredentialFeed } from './credential-feed.js';
import type { JwtVerifier } from './jwt-verifier.js';
import type { Principal } from './principal.js';

const VERIFIED_CACHE_MAX = 20_000;

function unauthenticated(detail = 'A valid bearer credential is required.'): DomainError {
  return new DomainError('unauthenticated', detail);
}

/** Turns a bearer credential into a Principal; every failure is the same kind of 401. */
export class Authenticator {
  /** Verified JWTs, so a signature is checked once per token rather than once per request. */
  private readonly verified = new Map<string, { principal: Principal; subject: string; issuedAtMs: number; expMs: number }>();

  constructor(
    private readonly adminToken: string,
    private readonly apiKeys: ApiKeyCache,
    private readonly feed: CredentialFeed,
    private readonly verifiers: Partial<Record<TokenKind, JwtVerifier>>,
  ) {}

  async authenticate(token: string): Promise<Principal> {
    if (token.startsWith('sk_') || token.split('.').length === 3) this.requireSyncedFeed();
    if (token.startsWith('sk_')) {
      if (!API_KEY_PATTERN.test(token)) throw unauthenticated('The API key is invalid or revoked.');
      return { kind: 'apiKey', ...(await this.apiKeys.authenticate(token)) };
    }
    if (token.split('.').length === 3) return this.authenticateJwt(token);
    if (constantTimeEqual(token, this.adminToken)) return { kind: 'admin' };
    throw unauthenticated();
  }

  /**
   * API keys and JWTs are honoured only once this replica has read the credential-change feed:
   * before that it cannot know which of them were revoked. 503 with Retry-After meanwhile.
   */
  private requireSyncedFeed(): void {
    if (!this.feed.isSynced) {
      throw new DomainError('service_unavailable', 'This gateway has not yet loaded credential revocations; retry shortly.', { retryAfterSeconds: 1 });
    }
  }

  private async authenticateJwt(token: string): Promise<Principal> {
    const now = Date.now();
    let hit = this.verified.get(token);
    if (!hit || hit.expMs <= now) {
      if (hit) this.verified.delete(token);
      const kind = this.kindOf(token);
      const verifier = kind && this.verifiers[kind];
      if (!kind || !verifier) throw unauthenticated();
      const claims = await verifier.verify(token);
      hit = { principal: principalOf(kind, claims), subject: claims.sub!, issuedAtMs: issuedAtMs(claims), expMs: claims.exp! * 1000 };
      if (this.verified.size >= VERIFIED_CACHE_MAX) this.verified.delete(this.verified.keys().next().value!);
      this.verified.set(token, hit);
    }
    if (this.feed.isTokenRevoked(hit.subject, hit.issuedAtMs)) throw unauthenticated('The bearer token has been revoked.');
    return hit.principal;
  }

  private kindOf(token: string): TokenKind | undefined {
    try {
      const { typ } = decodeProtectedHeader(token);
      return (Object.keys(TOKEN_KINDS) as TokenKind[]).find((k) => TOKEN_KINDS[k].typ === typ);
    } catch {
      return undefined;
    }
  }
}

function issuedAtMs(claims: JWTPayload): number {
  return typeof claims.iat_ms === 'number' ? claims.iat_ms : (claims.iat ?? 0) * 1000;
}

function principalOf(kind: TokenKind, c: JWTPayload): Principal {
  const str = (v: unknown) => (typeof v === 'string' && v ? v : undefined);
  switch (kind) {
    case 'merchantUser': {
      const role = str(c.role) as MerchantRole | undefined;
      if (!str(c.sub) || !str(c.mid) || !role || !MERCHANT_ROLES.includes(role)) throw unauthenticated();
      return { kind: 'merchantUser', userId: c.sub!, merchantId: c.mid as string, role };
    }
    case 'customer':
      if (!str(c.sub)) throw unauthenticated();
      return { kind: 'customer', accountId: c.sub! };
    case 'checkout':
      if (!str(c.sid) || !str(c.mid) || c.scope !== 'checkout') throw unauthenticated();
      return { kind: 'checkout', sessionId: c.sid as string, merchantId: c.mid as string };
  }
}
