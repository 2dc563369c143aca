import type { MikroORM } from '@mikro-orm/postgresql';
import type { ApiKeyEventType } from '@billing/contracts';
import { Batcher, insertOutboxSql, queryPrepared, toOutboxJsonRow, typedDatabaseError } from '@billing/service-runtime';
import { injectTraceHeaders } from '@billing/telemetry';
import type { ApiKey } from './api-key.js';

interface NewApiKey {
  key: ApiKey;
  traceContext: Record<string, string>;
}

/**
 * Persistence of create-API-key. The keys created together (see `Batcher`) are written with
 * their events in one autocommit statement instead of an ORM transaction per batch (BEGIN, an
 * insert per table, COMMIT, and the unit of work's bookkeeping), because on this path the round
 * trips and the ORM cost more than the SQL they carry. It writes exactly the rows the ORM would
 * (every column of `ApiKeySchema`, and `recordEvent`'s outbox row); `api-key-store.int.test.ts`
 * holds it to that.
 */
export class ApiKeyStore {
  constructor(private readonly orm: MikroORM) {}

  /**
   * Inserts a minted key with its `api_key.created` event (the key's endpoint state, occurring
   * at its `updatedAt`, carrying the caller's trace context), both or neither. Resolves once the
   * statement has committed. A key the database refuses (text Postgres cannot store, a taken
   * id or hash) fails alone, with the ORM's typed exception, as it would in a transaction of its own.
   */
  async insertCreated(key: ApiKey): Promise<void> {
    try {
      await this.inserts.submit({ key, traceContext: injectTraceHeaders() });
    } catch (e) {
      throw typedDatabaseError(this.orm, e);
    }
  }

  private readonly inserts = new Batcher<NewApiKey, void>(async (batch) => {
    const iso = (d: Date | null) => d?.toISOString() ?? null;
    const keys = batch.map(({ key: k }) => ({
      id: k.id,
      merchant_id: k.merchantId,
      name: k.name,
      key_hash: k.keyHash,
      key_prefix: k.keyPrefix,
      signing_secret_sealed: k.signingSecretSealed,
      signing_secret_prefix: k.signingSecretPrefix,
      webhook_url: k.webhookUrl,
      webhook_events: k.webhookEvents,
      webhook_enabled: k.webhookEnabled,
      expires_at: iso(k.expiresAt),
      last_used_at: iso(k.lastUsedAt),
      revoked_at: iso(k.revokedAt),
      created_at: iso(k.createdAt),
      updated_at: iso(k.updatedAt),
      version: k.version,
    }));
    const events = batch.map(({ key: k, traceContext }, seq) =>
      toOutboxJsonRow(seq, { type: 'api_key.created' satisfies ApiKeyEventType, merchantId: k.merchantId, data: k.endpointState(), occurredAt: k.updatedAt, traceContext }),
    );
    // One statement for the batch's keys and events: atomic without a transaction, one round trip.
    // It has no conflict clause, so it writes every row or fails as a whole (and `Batcher` then
    // runs each key alone). The events go in arrival order, the order the relay publishes in.
    await queryPrepared(
      this.orm,
      'api_key_insert_created_batch',
      `with keys as (
         insert into api_keys (id, merchant_id, name, key_hash, key_prefix, signing_secret_sealed, signing_secret_prefix, webhook_url,
                               webhook_events, webhook_enabled, expires_at, last_used_at, revoked_at, created_at, updated_at, version)
         select k.id, k.merchant_id, k.name, k.key_hash, k.key_prefix, k.signing_secret_sealed, k.signing_secret_prefix, k.webhook_url,
                k.webhook_events, k.webhook_enabled, k.expires_at, k.last_used_at, k.revoked_at, k.created_at, k.updated_at, k.version
           from jsonb_to_recordset($1::jsonb) as k(id uuid, merchant_id uuid, name text, key_hash text, key_prefix text, signing_secret_sealed text,
                  signing_secret_prefix text, webhook_url text, webhook_events jsonb, webhook_enabled boolean, expires_at timestamptz,
                  last_used_at timestamptz, revoked_at timestamptz, created_at timestamptz, updated_at timestamptz, version int))
       ${insertOutboxSql('$2')}`,
      [JSON.stringify(keys), JSON.stringify(events)],
    );
    return batch.map(() => undefined);
  });
}
