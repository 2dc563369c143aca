import { queryPrepared, type ServiceImpl } from '@billing/service-runtime';
import { IsolationLevel, type MikroORM } from '@mikro-orm/postgresql';
import type { TokenIssuer } from '../signing-keys/token-issuer.js';
import { DomainError } from '@billing/contracts';
import { CredentialChange } from './credential-change.js';

/** Changes older than this are pruned; longer than any token's lifetime. */
export const CREDENTIAL_FEED_RETENTION_HOURS = 24;

export function credentialsGrpc(orm: MikroORM, issuer: TokenIssuer): ServiceImpl<'identity.v1.Credentials'> {
  return {
    GetJwks: async () => ({ keysJson: JSON.stringify(issuer.jwks()) }),
    ListCredentialChanges: async (req) => {
      const after = /^\d+$/.test(req.afterCursor) ? req.afterCursor : '0';
      const rows = await readCommittedChanges(orm, after);
      const last = rows.at(-1)?.cursor ?? after;
      return {
        cursor: String(last),
        changes: rows.map((c) => ({ cursor: String(c.cursor), kind: c.kind, subjectId: c.subjectId, revoked: c.revoked, at: c.at.toISOString() })),
      };
    },
  };
}

/** How long a feed read waits for in-flight writers of the feed before giving up until the next poll. */
const FEED_LOCK_TIMEOUT_MS = 200;
const PAGE = 1000;

/**
 * The changes after `after`, such that no change with a cursor at or below the last one
 * returned can still commit later: a reader that follows the cursor never skips a revocation.
 *
 * Why: `cursor` is a bigserial, taken when a transaction inserts, but transactions commit in
 * any order. A reader that saw cursor 11 committed while 10 was still in flight would move past
 * 10 for good. So the read first takes `SHARE` on the table, which conflicts with the `ROW
 * EXCLUSIVE` lock every INSERT holds from before it draws its cursor until it commits: the lock
 * is granted only once every transaction that drew a cursor so far has committed or rolled back,
 * and the read's snapshot (taken after it, READ COMMITTED) sees all of those that committed;
 * any later insert draws a higher cursor. Readers do not block each other (SHARE does not
 * conflict with SHARE); a writer waits at most the few milliseconds of a read.
 * Chosen over the alternatives: a look-back window still loses a transaction that stays open
 * longer than the window; filtering on `pg_snapshot_xmin` of the current snapshot stalls the
 * feed behind any long transaction anywhere in the cluster, not just writers of this table.
 * A writer that stays open longer than FEED_LOCK_TIMEOUT_MS makes this poll fail (the gateway
 * retries at its next poll, from the same cursor): delayed, never skipped.
 */
async function readCommittedChanges(orm: MikroORM, after: string): Promise<CredentialChange[]> {
  // Nearly every poll finds nothing. An empty answer leaves the reader's cursor where it was, so
  // it cannot skip anything and needs no lock: one plain read decides it (the gateway polls
  // several times a second, and the locked read was a transaction of five statements).
  const { rows } = await queryPrepared(orm, 'credential_changes_any_after', 'select 1 from credential_changes where cursor > $1 limit 1', [after]);
  if (rows.length === 0) return [];
  const table = `"${orm.config.get('schema')}"."credential_changes"`;
  try {
    return await orm.em.fork().transactional(
      async (em) => {
        await em.execute(`set local lock_timeout = '${FEED_LOCK_TIMEOUT_MS}ms'`);
        await em.execute(`lock table ${table} in share mode`);
        return em.find(CredentialChange, { cursor: { $gt: after } }, { orderBy: { cursor: 'asc' }, limit: PAGE });
      },
      { isolationLevel: IsolationLevel.READ_COMMITTED },
    );
  } catch (e) {
    if ((e as { code?: string }).code === '55P03') throw new DomainError('service_unavailable', 'The credential feed is being written; retry shortly.', { retryAfterSeconds: 1 });
    throw e;
  }
}
