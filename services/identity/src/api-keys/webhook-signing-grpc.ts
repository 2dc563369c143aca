import type { MikroORM } from '@mikro-orm/postgresql';
import { DomainError, isUuidText } from '@billing/contracts';
import { Batcher, requireScope, type SecretBox, type ServiceImpl } from '@billing/service-runtime';
import { ApiKey } from './api-key.js';

/** `identity.v1.WebhookSigning`: the plaintext signing secret of a key (the caller rules admit webhooks, which signs deliveries, and checkout, which signs and verifies deep links). */
export function webhookSigningGrpc(orm: MikroORM, box: SecretBox): ServiceImpl<'identity.v1.WebhookSigning'> {
  /** Reads that arrive together share one `select ... where id in (...)`; each still reads the current row (a revocation is seen at once). */
  const reads = new Batcher<string, ApiKey | undefined>(async (ids) => {
    const found = await orm.em.fork().find(ApiKey, { id: { $in: [...new Set(ids)] } });
    const byId = new Map(found.map((k) => [k.id, k]));
    return ids.map((id) => byId.get(id));
  });

  return {
    GetSigningSecret: async (req) => {
      const scope = requireScope(req.scope);
      if (!isUuidText(req.apiKeyId)) throw new DomainError('not_found', 'API key not found.');
      const key = await reads.submit(req.apiKeyId.toLowerCase());
      // Another merchant's key is indistinguishable from a missing one.
      if (!key || (scope.kind === 'merchant' && key.merchantId !== scope.merchantId)) throw new DomainError('not_found', 'API key not found.');
      return { apiKeyId: key.id, merchantId: key.merchantId, signingSecret: box.open(key.signingSecretSealed), revoked: key.revokedAt !== null, expiresAt: key.expiresAt?.toISOString() };
    },
  };
}
