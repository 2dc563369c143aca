import type { MikroORM } from '@mikro-orm/postgresql';
import { IdempotencyRecord, type StoredResponse } from './idempotency-record.js';

/** Rows deleted per statement by the expiry job. */
export const EXPIRY_BATCH_SIZE = 5000;

export interface Claim {
  scope: string;
  key: string;
  fingerprint: string;
  method: string;
  path: string;
  claimToken: string;
  now: Date;
  expiresAt: Date;
}

/** The part of a node-postgres client the store uses. */
interface PgClient {
  query(config: { name: string; text: string; values: unknown[] }): Promise<{ rowCount: number | null; rows: unknown[] }>;
}

/**
 * The idempotency table. Each write is one statement so that concurrent requests (on any
 * replica) are decided by Postgres row locks, never by a read-then-write race.
 *
 * The writes run on every idempotent request, so they skip MikroORM's query building and run
 * as named prepared statements (parsed and planned once per connection) on a connection of
 * MikroORM's own pool; reads of whole records go through MikroORM.
 */
export class IdempotencyStore {
  constructor(private readonly orm: MikroORM) {}

  private async run(name: string, text: string, values: unknown[]): Promise<{ rowCount: number }> {
    const client = this.orm.em.getKnex().client as { acquireConnection(): Promise<PgClient>; releaseConnection(c: PgClient): Promise<void> };
    const conn = await client.acquireConnection();
    try {
      const res = await conn.query({ name, text, values });
      return { rowCount: res.rowCount ?? 0 };
    } finally {
      await client.releaseConnection(conn);
    }
  }

  /**
   * Claims the key for this attempt: inserts it, or takes over a row that has expired or that a
   * 4xx released for the same fingerprint. True when this attempt now holds the key.
   */
  async claim(c: Claim): Promise<boolean> {
    const res = await this.run(
      'idempotency_claim',
      `insert into idempotency_records as r
         (scope, key, fingerprint, method, path, state, claim_token, claimed_at, created_at, expires_at)
       values ($1, $2, $3, $4, $5, 'in_flight', $6, $7, $7, $8)
       on conflict (scope, key) do update set
         fingerprint = excluded.fingerprint, method = excluded.method, path = excluded.path, state = 'in_flight',
         claim_token = excluded.claim_token, claimed_at = excluded.claimed_at, created_at = excluded.created_at,
         expires_at = excluded.expires_at, response_status = null, response_headers = null, response_body = null,
         completed_at = null
       where r.expires_at <= excluded.claimed_at or (r.state = 'released' and r.fingerprint = excluded.fingerprint)
       returning r.claim_token`,
      [c.scope, c.key, c.fingerprint, c.method, c.path, c.claimToken, c.now, c.expiresAt],
    );
    return res.rowCount === 1;
  }

  async find(scope: string, key: string): Promise<IdempotencyRecord | null> {
    return this.orm.em.fork().findOne(IdempotencyRecord, { scope, key });
  }

  /** Stores the outcome of the attempt holding the claim; false when it no longer holds it. */
  async complete(scope: string, key: string, claimToken: string, response: StoredResponse, now: Date): Promise<boolean> {
    const res = await this.run(
      'idempotency_complete',
      `update idempotency_records
          set state = 'completed', response_status = $1, response_headers = $2, response_body = $3, completed_at = $4
        where scope = $5 and key = $6 and claim_token = $7 and state = 'in_flight'`,
      [response.status, JSON.stringify(response.headers), response.body, now, scope, key, claimToken],
    );
    return res.rowCount === 1;
  }

  /** Frees the key after a 4xx; the fingerprint stays, so only the same request may claim it again. */
  async release(scope: string, key: string, claimToken: string, now: Date): Promise<boolean> {
    const res = await this.run(
      'idempotency_release',
      `update idempotency_records set state = 'released', completed_at = $1
        where scope = $2 and key = $3 and claim_token = $4 and state = 'in_flight'`,
      [now, scope, key, claimToken],
    );
    return res.rowCount === 1;
  }

  /** Deletes up to `batch` expired records; returns how many. */
  async deleteExpired(now: Date, batch = EXPIRY_BATCH_SIZE): Promise<number> {
    const res = await this.run(
      'idempotency_delete_expired',
      `delete from idempotency_records where ctid = any (array(
         select ctid from idempotency_records where expires_at <= $1 limit $2 for update skip locked))`,
      [now, batch],
    );
    return res.rowCount;
  }
}
