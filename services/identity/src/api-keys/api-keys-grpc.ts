import { LockMode, type EntityManager, type MikroORM } from '@mikro-orm/postgresql';
import { AdminCreateApiKeyRequest, distinctUuids, DomainError, isUuidText, parseOrThrow, WebhookSettings, type ApiKeyEventType } from '@billing/contracts';
import { GroupWrite, merchantFilter, recordEvent, requireMerchantScope, requireScope, type CallScope, type SecretBox, type ServiceImpl } from '@billing/service-runtime';
import { CredentialChange } from '../credential-changes/credential-change.js';
import { ApiKey } from './api-key.js';
import { ApiKeyStore } from './api-key-store.js';
import { assertWebhookUrlAllowed } from './webhook-url.js';

export function toApiKeyMessage(k: ApiKey) {
  return {
    id: k.id,
    merchantId: k.merchantId,
    name: k.name,
    keyPrefix: k.keyPrefix,
    signingSecretPrefix: k.signingSecretPrefix,
    // A revoked key gets no webhooks (the webhooks service delivers only to keys not revoked), so its
    // webhook reads as off; the URL and event types stay as they were set.
    ...webhookFieldsMessage({ webhookUrl: k.webhookUrl, webhookEvents: k.webhookEvents, webhookEnabled: k.webhookEnabled && !k.revokedAt }),
    expiresAt: k.expiresAt?.toISOString(),
    lastUsedAt: k.lastUsedAt?.toISOString(),
    revokedAt: k.revokedAt?.toISOString(),
    createdAt: k.createdAt.toISOString(),
  };
}

/** A key's webhook settings as the messages carry them (`webhook_events_all` for null: every type). */
export function webhookFieldsMessage(w: { webhookUrl: string | null; webhookEvents: string[] | null; webhookEnabled: boolean }) {
  return { webhookUrl: w.webhookUrl ?? undefined, webhookEventsAll: w.webhookEvents === null, webhookEvents: w.webhookEvents ?? [], webhookEnabled: w.webhookEnabled };
}

/** A key addressed by id: another merchant's key is indistinguishable from a missing one. */
export async function findKey(em: EntityManager, scope: CallScope, id: string): Promise<ApiKey> {
  if (!isUuidText(id)) throw new DomainError('not_found', 'API key not found.');
  const where = { id: id.toLowerCase(), ...merchantFilter(scope) };
  const key = await em.findOne(ApiKey, where);
  if (!key) throw new DomainError('not_found', 'API key not found.');
  return key;
}

/** A change of one key (and the events it records), made under the key's row lock. */
interface KeyChange {
  scope: CallScope;
  id: string;
  change: (key: ApiKey, em: EntityManager) => void;
}

/** Announces the key's endpoint state to the webhooks read model, in the caller's transaction. */
function recordEndpointEvent(em: EntityManager, type: ApiKeyEventType, key: ApiKey): void {
  recordEvent(em, { type, merchantId: key.merchantId, data: key.endpointState(), occurredAt: key.updatedAt });
}

export function apiKeysGrpc(orm: MikroORM, box: SecretBox, opts: { production: boolean }): ServiceImpl<'identity.v1.ApiKeys'> {
  const store = new ApiKeyStore(orm);
  /**
   * Changes of a key and their events under its row lock, group-committed: the changes that
   * arrive together share one locking read and one transaction; one key's never share a batch.
   */
  const changes = new GroupWrite(
    orm,
    {
      load: async (em: EntityManager, items: readonly KeyChange[]) => {
        const ids = distinctUuids(items.map((c) => c.id));
        const keys = ids.length ? await em.find(ApiKey, { id: { $in: ids } }, { lockMode: LockMode.PESSIMISTIC_WRITE, orderBy: { id: 'asc' } }) : [];
        return new Map(keys.map((k) => [k.id, k]));
      },
      apply: (em: EntityManager, c: KeyChange, keys: Map<string, ApiKey>) => {
        const key = isUuidText(c.id) ? keys.get(c.id.toLowerCase()) : undefined;
        if (!key || (c.scope.kind === 'merchant' && key.merchantId !== c.scope.merchantId)) throw new DomainError('not_found', 'API key not found.');
        c.change(key, em);
        return toApiKeyMessage(key);
      },
    },
    { keyOf: (c) => c.id.toLowerCase() },
  );
  return {
    CreateApiKey: async (req) => {
      const merchantId = requireMerchantScope(req.scope);
      const input = parseOrThrow(AdminCreateApiKeyRequest, { name: req.name, expiresAt: req.expiresAt });
      const { apiKey, key, signingSecret } = ApiKey.mint({ merchantId, name: input.name, expiresAt: input.expiresAt ? new Date(input.expiresAt) : null }, box);
      await store.insertCreated(apiKey);
      return { apiKey: toApiKeyMessage(apiKey), key, signingSecret };
    },

    ListApiKeys: async (req) => {
      const [items, total] = await orm.em.fork().findAndCount(
        ApiKey,
        { merchantId: requireMerchantScope(req.scope) },
        { orderBy: { createdAt: 'desc', id: 'asc' }, limit: req.pageSize, offset: (req.page - 1) * req.pageSize },
      );
      return { items: items.map(toApiKeyMessage), totalCount: total };
    },

    GetApiKey: async (req) => toApiKeyMessage(await findKey(orm.em.fork(), requireScope(req.scope), req.id)),

    RevokeApiKey: async (req) => {
      const scope = requireScope(req.scope);
      return changes.run({
        scope,
        id: req.id,
        change: (key, em) => {
          if (!key.revoke()) return;
          em.persist(CredentialChange.of('api_key', key.id, true));
          recordEndpointEvent(em, 'api_key.revoked', key);
        },
      });
    },

    AuthenticateApiKey: async (req) => {
      const key = await orm.em.fork().findOne(ApiKey, { keyHash: req.keyHash });
      if (!key) return { found: false, id: '', merchantId: '' };
      return { found: true, id: key.id, merchantId: key.merchantId, expiresAt: key.expiresAt?.toISOString(), revokedAt: key.revokedAt?.toISOString() };
    },

    UpdateWebhook: async (req) => {
      const scope = requireScope(req.scope);
      const change = parseOrThrow(WebhookSettings, {
        webhookUrl: req.setWebhookUrl ? (req.webhookUrl ?? null) : undefined,
        webhookEvents: req.setWebhookEvents ? (req.webhookEventsAll ? null : req.webhookEvents) : undefined,
        webhookEnabled: req.webhookEnabled,
      });
      if (change.webhookUrl) await assertWebhookUrlAllowed(change.webhookUrl, opts.production);
      return changes.run({
        scope,
        id: req.id,
        change: (key, em) => {
          key.configureWebhook({ webhookUrl: change.webhookUrl, webhookEvents: change.webhookEvents, webhookEnabled: change.webhookEnabled });
          recordEndpointEvent(em, 'api_key.webhook_configured', key);
        },
      });
    },

    RecordApiKeyUsage: async (req) => {
      const usages = req.usages.filter((u) => isUuidText(u.id) && !Number.isNaN(Date.parse(u.usedAt)));
      if (usages.length === 0) return {};
      // One statement for the whole batch; never moves lastUsedAt backwards.
      await orm.em.getConnection().execute(
        `update api_keys k set last_used_at = greatest(k.last_used_at, u.used_at)
           from jsonb_to_recordset(?::jsonb) as u(id uuid, used_at timestamptz)
          where k.id = u.id`,
        [JSON.stringify(usages.map((u) => ({ id: u.id, used_at: u.usedAt })))],
      );
      return {};
    },
  };
}
