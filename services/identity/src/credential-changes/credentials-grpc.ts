import type { ServiceImpl } from '@billing/service-runtime';
import type { MikroORM } from '@mikro-orm/postgresql';
import type { TokenIssuer } from '../signing-keys/token-issuer.js';
import { CredentialChange } from './credential-change.js';

/** Changes older than this are pruned; longer than any token's lifetime. */
export const CREDENTIAL_FEED_RETENTION_HOURS = 24;

export function credentialsGrpc(orm: MikroORM, issuer: TokenIssuer): ServiceImpl<'identity.v1.Credentials'> {
  return {
    GetJwks: async () => ({ keysJson: JSON.stringify(issuer.jwks()) }),
    ListCredentialChanges: async (req) => {
      const em = orm.em.fork();
      const after = /^\d+$/.test(req.afterCursor) ? req.afterCursor : '0';
      const rows = await em.find(CredentialChange, { cursor: { $gt: after } }, { orderBy: { cursor: 'asc' }, limit: 1000 });
      const last = rows.at(-1)?.cursor ?? after;
      return {
        cursor: String(last),
        changes: rows.map((c) => ({ cursor: String(c.cursor), kind: c.kind, subjectId: c.subjectId, revoked: c.revoked, at: c.at.toISOString() })),
      };
    },
  };
}
