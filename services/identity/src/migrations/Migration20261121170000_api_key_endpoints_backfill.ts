import { Migration } from '@mikro-orm/migrations';

/**
 * Announces every API key that existed before identity emitted `api_key.*` events, so the
 * webhooks service's endpoints read model starts complete. Harmless on a fresh database (no
 * keys) and to a consumer that already knows a key (same version: the newer-version rule keeps it).
 */
export class Migration20261121170000_api_key_endpoints_backfill extends Migration {
  override async up(): Promise<void> {
    this.addSql(`insert into "identity"."outbox" ("id", "type", "merchant_id", "data", "occurred_at", "trace_context")
      select gen_random_uuid(), 'api_key.created', k."merchant_id",
        jsonb_build_object(
          'apiKeyId', k."id", 'merchantId', k."merchant_id", 'webhookUrl', k."webhook_url", 'webhookEvents', k."webhook_events",
          'webhookEnabled', k."webhook_enabled", 'revoked', k."revoked_at" is not null, 'version', k."version"),
        now(), '{}'
      from "identity"."api_keys" k`);
  }
}
