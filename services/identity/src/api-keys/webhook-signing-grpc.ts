import type { MikroORM } from '@mikro-orm/postgresql';
import { DomainError, isUuidText } from '@billing/contracts';
import { merchantFilter, requireScope, type SecretBox, type ServiceImpl } from '@billing/service-runtime';
import { ApiKey } from './api-key.js';

/** `identity.v1.WebhookSigning`: the plaintext signing secret of a key (the caller rules admit webhooks, which signs deliveries, and checkout, which signs and verifies deep links). */
export function webhookSigningGrpc(orm: MikroORM, box: SecretBox): ServiceImpl<'identity.v1.WebhookSigning'> {
  return {
    GetSigningSecret: async (req) => {
      const scope = requireScope(req.scope);
      if (!isUuidText(req.apiKeyId)) throw new DomainError('not_found', 'API key not found.');
      const key = await orm.em.fork().findOne(ApiKey, { id: req.apiKeyId.toLowerCase(), ...merchantFilter(scope) });
      if (!key) throw new DomainError('not_found', 'API key not found.');
      return { apiKeyId: key.id, merchantId: key.merchantId, signingSecret: box.open(key.signingSecretSealed), revoked: key.revokedAt !== null, expiresAt: key.expiresAt?.toISOString() };
    },
  };
}
