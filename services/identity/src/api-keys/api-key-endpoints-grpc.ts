import type { MikroORM } from '@mikro-orm/postgresql';
import { DomainError, isUuidText } from '@billing/contracts';
import { merchantFilter, requireScope, type ServiceImpl } from '@billing/service-runtime';
import { ApiKey } from './api-key.js';

/**
 * `identity.v1.ApiKeyEndpoints`: a key's committed webhook endpoint state, the one its latest
 * `api_key.*` event carries (the caller rules admit webhooks alone, which syncs its copy).
 */
export function apiKeyEndpointsGrpc(orm: MikroORM): ServiceImpl<'identity.v1.ApiKeyEndpoints'> {
  return {
    GetApiKeyEndpointState: async (req) => {
      const scope = requireScope(req.scope);
      if (!isUuidText(req.apiKeyId)) throw new DomainError('not_found', 'API key not found.');
      // Another merchant's key is indistinguishable from a missing one.
      const key = await orm.em.fork().findOne(ApiKey, { id: req.apiKeyId.toLowerCase(), ...merchantFilter(scope) });
      if (!key) throw new DomainError('not_found', 'API key not found.');
      const s = key.endpointState();
      return {
        apiKeyId: s.apiKeyId,
        merchantId: s.merchantId,
        webhookUrl: s.webhookUrl ?? undefined,
        webhookEventsAll: s.webhookEvents === null,
        webhookEvents: s.webhookEvents ?? [],
        webhookEnabled: s.webhookEnabled,
        revoked: s.revoked,
        version: s.version,
        changedAt: key.updatedAt.toISOString(),
      };
    },
  };
}
