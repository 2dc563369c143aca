import { createLocalJWKSet, errors as joseErrors, jwtVerify, type JSONWebKeySet, type JWTPayload } from 'jose';
import { DomainError, JWT_ALG, TOKEN_KINDS, type TokenKind } from '@billing/contracts';
import type { Logger } from '@billing/service-runtime';

type JwksSource = () => Promise<JSONWebKeySet>;

/** Refetch a key set on an unknown `kid` at most this often. */
const REFRESH_COOLDOWN_MS = 5_000;

/**
 * Verifies platform JWTs of one kind against the issuer's published key set. The algorithm,
 * issuer, audience, header `typ` and expiry are all pinned, so `alg: none`, another kind's
 * token or a foreign key are refused alike.
 */
export class JwtVerifier {
  private keySet?: ReturnType<typeof createLocalJWKSet>;
  private lastFetch = 0;
  private fetching?: Promise<void>;

  constructor(
    private readonly kind: TokenKind,
    private readonly source: JwksSource,
    private readonly logger: Logger,
  ) {}

  async verify(token: string): Promise<JWTPayload> {
    const spec = TOKEN_KINDS[this.kind];
    if (!this.keySet) await this.refresh(true);
    // exp, iat and sub are required of every kind: a token without exp could otherwise be cached
    // forever. No clock tolerance: identity, which signs, and the gateway keep one time, and a
    // token is refused the moment its exp has passed.
    const options = { algorithms: [JWT_ALG], issuer: spec.iss, audience: spec.aud, typ: spec.typ, clockTolerance: 0, requiredClaims: ['exp', 'iat', 'sub'] };
    try {
      return (await jwtVerify(token, this.keySet!, options)).payload;
    } catch (e) {
      if (e instanceof joseErrors.JWKSNoMatchingKey && (await this.refresh(false))) {
        try {
          return (await jwtVerify(token, this.keySet!, options)).payload;
        } catch {
          /* fall through to unauthenticated */
        }
      }
      throw new DomainError('unauthenticated', 'The bearer token is invalid or expired.');
    }
  }

  /** Whether a (re)fetch happened. */
  private async refresh(force: boolean): Promise<boolean> {
    if (!force && Date.now() - this.lastFetch < REFRESH_COOLDOWN_MS) return false;
    this.fetching ??= this.source()
      .then((jwks) => {
        this.keySet = createLocalJWKSet(jwks);
        this.lastFetch = Date.now();
      })
      .finally(() => (this.fetching = undefined));
    try {
      await this.fetching;
      return true;
    } catch (e) {
      this.logger.warn({ err: e, kind: this.kind }, 'could not fetch signing keys');
      if (!this.keySet) throw new DomainError('service_unavailable', 'Token verification keys are unavailable.', { retryAfterSeconds: 1 });
      return false;
    }
  }
}
