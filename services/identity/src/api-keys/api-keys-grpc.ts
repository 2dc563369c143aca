import type { EntityManager, MikroORM } from '@mikro-orm/postgresql';
import { AdminCreateApiKeyRequest, DomainError, isUuidText, parseOrThrow, WebhookSettings, type ApiKeyEventType } from '@billing/contracts';
import { merchantFilter, recordEvent, requireMerchantScope, requireScope, type CallScope, type SecretBox, type ServiceImpl } from '@billing/service-runtime';
import { CredentialChange } from '../credential-changes/credential-change.js';
import { ApiKey } from './api-key.js';
import { assertWebhookUrlAllowed } from './webhook-url.js';

export function toApiKeyMessage(k: ApiKey) {
  return {
    id: k.id,
    merchantId: k.merchantId,
    name: k.name,
    keyPrefix: k.keyPrefix,
    signingSecretPrefix: k.signingSecretPrefix,
    webhookUrl: k.webhookUrl ?? undefined,
    webhookEventsAll: k.webhookEvents === null,
    webhookEvents: k.webhookEvents ?? [],
    webhookEnabled: k.webhookEnabled,
    expiresAt: k.expiresAt?.toISOString(),
    lastUsedAt: k.lastUsedAt?.toISOString(),
    revokedAt: k.revokedAt?.toISOString(),
    createdAt: k.createdAt.toISOString(),
  };
}

/** A key addressed by id: another merchant's key is indistinguishable from a missing one. */
async function findKey(em: EntityManager, scope: CallScope, id: string, lock = false): Promise<ApiKey> {
  if (!isUuidText(id)) throw new DomainError('not_found', 'API key not found.');
  const where = { id: id.toLowerCase(), ...merchantFilter(scope) };
  const key = await em.findOne(ApiKey, where, lock ? { lockMode: 4 } : {});
  if (!key) throw new DomainError('not_found', 'API key not found.');
  return key;
}

/** Announces the key's endpoint state to the webhooks read model, in the caller's transaction. */
function recordEndpointEvent(em: EntityManager, type: ApiKeyEventType, key: ApiKey): void {
  recordEvent(em, { type, merchantId: key.merchantId, data: key.endpointState(), occurredAt: key.updatedAt });
}

export function apiKeysGrpc(orm: MikroORM, box: SecretBox, opts: { production: boolean }): ServiceImpl<'identity.v1.ApiKeys'> {
  return {
    CreateApiKey: async (req) => {
      const merchantId = requireMerchantScope(req.scope);
      const input = parseOrThrow(AdminCreateApiKeyRequest, { name: req.name, expiresAt: req.expiresAt });
      const { apiKey, key, signingSecret } = ApiKey.mint({ merchantId, name: input.name, expiresAt: input.expiresAt ? new Date(input.expiresAt) : null }, box);
      await orm.em.fork().transactional(async (em) => {
        em.persist(apiKey);
        recordEndpointEvent(em, 'api_key.created', apiKey);
      });
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
      return orm.em.fork().transactional(async (em) => {
        const key = await findKey(em, scope, req.id, true);
        if (key.revoke()) {
          em.persist(CredentialChange.of('api_key', key.id, true));
          recordEndpointEvent(em, 'api_key.revoked', key);
        }
        return toApiKeyMessage(key);
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
      return orm.em.fork().transactional(async (em) => {
        const key = await findKey(em, scope, req.id, true);
        key.configureWebhook({ webhookUrl: change.webhookUrl, webhookEvents: change.webhookEvents, webhookEnabled: change.webhookEnabled });
        recordEndpointEvent(em, 'api_key.webhook_configured', key);
        return toApiKeyMessage(key);
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
