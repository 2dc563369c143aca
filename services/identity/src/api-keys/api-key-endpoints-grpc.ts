import type { MikroORM } from '@mikro-orm/postgresql';
import { requireScope, type ServiceImpl } from '@billing/service-runtime';
import { findKey, webhookFieldsMessage } from './api-keys-grpc.js';

/**
 * `identity.v1.ApiKeyEndpoints`: a key's committed webhook endpoint state, the one its latest
 * `api_key.*` event carries (the caller rules admit webhooks alone, which syncs its copy).
 */
export function apiKeyEndpointsGrpc(orm: MikroORM): ServiceImpl<'identity.v1.ApiKeyEndpoints'> {
  return {
    GetApiKeyEndpointState: async (req) => {
      const key = await findKey(orm.em.fork(), requireScope(req.scope), req.apiKeyId);
      const s = key.endpointState();
      return {
        apiKeyId: s.apiKeyId,
        merchantId: s.merchantId,
        ...webhookFieldsMessage(s),
        revoked: s.revoked,
        version: s.version,
        changedAt: key.updatedAt.toISOString(),
      };
    },
  };
}
