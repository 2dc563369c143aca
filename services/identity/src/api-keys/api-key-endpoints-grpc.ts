import type { MikroORM } from '@mikro-orm/postgresql';
import { DomainError, isUuidText } from '@billing/contracts';
import { Batcher, queryPrepared, requireScope, type CallScope, type ServiceImpl } from '@billing/service-runtime';
import { webhookFieldsMessage } from './api-keys-grpc.js';

/** A key's endpoint state as stored (`ApiKeySchema`'s columns). */
interface EndpointStateRow {
  id: string;
  merchant_id: string;
  webhook_url: string | null;
  webhook_events: string[] | null;
  webhook_enabled: boolean;
  revoked: boolean;
  version: number;
  /** `updatedAt` as `Date.toISOString` writes it (the stored instants are whole milliseconds). */
  changed_at: string;
}

interface StateRead {
  scope: CallScope;
  id: string;
}

/**
 * `identity.v1.ApiKeyEndpoints`: a key's committed webhook endpoint state, the one its latest
 * `api_key.*` event carries (the caller rules admit webhooks alone, which syncs its copy).
 *
 * The webhooks service reads one state per `api_key.*` event it ingests, so on a burst of key
 * creations this runs once per key: the reads that arrive together (one gathered call from
 * webhooks, see `IdentityEndpointStates`) are one query by primary key, without the ORM. Each
 * read is answered exactly as alone: a key another merchant's scope names is not found.
 */
export function apiKeyEndpointsGrpc(orm: MikroORM): ServiceImpl<'identity.v1.ApiKeyEndpoints'> {
  const reads = new Batcher<StateRead, EndpointStateRow | undefined>(async (batch) => {
    const res = await queryPrepared<EndpointStateRow>(
      orm,
      'api_key_endpoint_states',
      `select id, merchant_id, webhook_url, webhook_events, webhook_enabled, revoked_at is not null as revoked, version,
              to_char(updated_at at time zone 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.MS"Z"') as changed_at
         from api_keys where id = any($1::uuid[])`,
      [[...new Set(batch.map((r) => r.id))]],
    );
    const byId = new Map(res.rows.map((row) => [row.id, row]));
    return batch.map(({ scope, id }) => {
      const row = byId.get(id);
      return row && (scope.kind !== 'merchant' || row.merchant_id === scope.merchantId) ? row : undefined;
    });
  });

  return {
    GetApiKeyEndpointState: async (req) => {
      const scope = requireScope(req.scope);
      const row = isUuidText(req.apiKeyId) ? await reads.submit({ scope, id: req.apiKeyId.toLowerCase() }) : undefined;
      if (!row) throw new DomainError('not_found', 'API key not found.');
      return {
        apiKeyId: row.id,
        merchantId: row.merchant_id,
        ...webhookFieldsMessage({ webhookUrl: row.webhook_url, webhookEvents: row.webhook_events, webhookEnabled: row.webhook_enabled }),
        revoked: row.revoked,
        version: row.version,
        changedAt: row.changed_at,
      };
    },
  };
}
