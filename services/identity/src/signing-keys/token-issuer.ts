import { randomUUID } from 'node:crypto';
import type { EntityManager } from '@mikro-orm/postgresql';
import { exportJWK, generateKeyPair, importJWK, SignJWT, type JWK, type CryptoKey } from 'jose';
import { JWT_ALG, TOKEN_KINDS, type TokenKind } from '@billing/contracts';
import type { SecretBox } from '@billing/service-runtime';
import { SigningKey } from './signing-key.js';

/**
 * Signs identity's tokens with the newest signing key, creating one on first start. Every
 * replica converges on the same key through the database; verifiers fetch the public half.
 */
export class TokenIssuer {
  private current?: { kid: string; key: CryptoKey };
  private publicJwks: JWK[] = [];

  constructor(private readonly box: SecretBox) {}

  async load(em: EntityManager): Promise<void> {
    let keys = await em.find(SigningKey, {}, { orderBy: { createdAt: 'desc' } });
    if (keys.length === 0) {
      const { privateKey, publicKey } = await generateKeyPair(JWT_ALG, { extractable: true });
      const kid = randomUUID();
      const publicJwk = { ...(await exportJWK(publicKey)), kid, alg: JWT_ALG, use: 'sig' };
      const privateJwk = await exportJWK(privateKey);
      // Two replicas may race to create the first key; the loser adopts the winner's.
      await em.getConnection().execute(
        `insert into signing_keys (kid, private_key_sealed, public_jwk, created_at)
         select ?, ?, ?, now() where not exists (select 1 from signing_keys)`,
        [kid, this.box.seal(JSON.stringify(privateJwk)), JSON.stringify(publicJwk)],
      );
      keys = await em.find(SigningKey, {}, { orderBy: { createdAt: 'desc' } });
    }
    const newest = keys[0]!;
    const privateJwk = JSON.parse(this.box.open(newest.privateKeySealed)) as JWK;
    this.current = { kid: newest.kid, key: (await importJWK(privateJwk, JWT_ALG)) as CryptoKey };
    this.publicJwks = keys.map((k) => k.publicJwk as JWK);
  }

  jwks(): JWK[] {
    return this.publicJwks;
  }

  /** Signs a token of `kind` for `subject`; returns it with its expiry. */
  async issue(kind: TokenKind, subject: string, claims: Record<string, unknown>, ttlSeconds: number): Promise<{ token: string; expiresAt: Date }> {
    if (!this.current) throw new Error('TokenIssuer.load() was not called');
    const spec = TOKEN_KINDS[kind];
    const now = Math.floor(Date.now() / 1000);
    const exp = now + ttlSeconds;
    const token = await new SignJWT(claims)
      .setProtectedHeader({ alg: JWT_ALG, kid: this.current.kid, typ: spec.typ })
      .setSubject(subject)
      .setIssuer(spec.iss)
      .setAudience(spec.aud)
      .setIssuedAt(now)
      .setExpirationTime(exp)
      .setJti(randomUUID())
      .sign(this.current.key);
    return { token, expiresAt: new Date(exp * 1000) };
  }
}
