import { exportJWK, generateKeyPair, SignJWT, type JWTPayload } from 'jose';
import { describe, expect, it } from 'vitest';
import { DomainError, JWT_ALG, TOKEN_KINDS, type TokenKind } from '@billing/contracts';
import { createLogger } from '@billing/service-runtime';
import { JwtVerifier } from './jwt-verifier.js';

/**
 * Regression for: the verifier did not require `exp`, `iat` or `sub`, so a token without `exp`
 * would have been accepted and cached forever. (A test through the gateway cannot mint tokens
 * with identity's key, so this one signs with a key set of its own.)
 */
const { privateKey, publicKey } = await generateKeyPair(JWT_ALG);
const jwk = { ...(await exportJWK(publicKey)), kid: 'k1', alg: JWT_ALG, use: 'sig' };
const logger = createLogger('jwt-test', 'silent');

async function sign(kind: TokenKind, claims: { sub?: string; iat?: boolean; exp?: boolean | number }): Promise<string> {
  const spec = TOKEN_KINDS[kind];
  let jwt = new SignJWT({ mid: 'm', role: 'Owner', sid: 's', scope: 'checkout' } as JWTPayload)
    .setProtectedHeader({ alg: JWT_ALG, kid: 'k1', typ: spec.typ })
    .setIssuer(spec.iss)
    .setAudience(spec.aud);
  if (claims.sub) jwt = jwt.setSubject(claims.sub);
  if (claims.iat) jwt = jwt.setIssuedAt();
  if (claims.exp) jwt = jwt.setExpirationTime(claims.exp === true ? '10m' : claims.exp);
  return jwt.sign(privateKey);
}

describe('JWT verification requires exp, iat and sub on every kind', () => {
  for (const kind of Object.keys(TOKEN_KINDS) as TokenKind[]) {
    const verifier = new JwtVerifier(kind, async () => ({ keys: [jwk] }), logger);

    it(`${kind}: accepts a token with all three`, async () => {
      await expect(verifier.verify(await sign(kind, { sub: 'u1', iat: true, exp: true }))).resolves.toMatchObject({ sub: 'u1' });
    });

    it(`${kind}: refuses a token the moment its exp has passed, with no tolerance`, async () => {
      const err = await verifier.verify(await sign(kind, { sub: 'u1', iat: true, exp: Math.floor(Date.now() / 1000) - 1 })).catch((e: unknown) => e);
      expect((err as DomainError).code).toBe('unauthenticated');
    });

    for (const missing of ['exp', 'iat', 'sub'] as const) {
      it(`${kind}: refuses a token without ${missing}`, async () => {
        const claims = { sub: missing === 'sub' ? undefined : 'u1', iat: missing !== 'iat', exp: missing !== 'exp' };
        const err = await verifier.verify(await sign(kind, claims)).catch((e: unknown) => e);
        expect(err).toBeInstanceOf(DomainError);
        expect((err as DomainError).code).toBe('unauthenticated');
      });
    }
  }
});
