import type { MikroORM } from '@mikro-orm/postgresql';
import { DomainError, isUuidText } from '@billing/contracts';
import type { SecretBox, ServiceImpl } from '@billing/service-runtime';
import { ApiKey } from './api-key.js';

/** Metadata entry an internal caller of `identity.v1.WebhookSigning` names itself with. */
export const INTERNAL_CALLER_KEY = 'x-internal-caller';
/** Who may read signing secrets: webhooks signs deliveries, checkout signs and verifies deep links. */
const ALLOWED_CALLERS = new Set(['webhooks', 'checkout']);

/** `identity.v1.WebhookSigning`: the plaintext signing secret of a key, for the webhooks and checkout services only. */
export function webhookSigningGrpc(orm: MikroORM, box: SecretBox): ServiceImpl<'identity.v1.WebhookSigning'> {
  return {
    GetSigningSecret: async (req, call) => {
      const caller = call.metadata.get(INTERNAL_CALLER_KEY)[0]?.toString();
      if (!caller || !ALLOWED_CALLERS.has(caller)) throw new DomainError('forbidden', 'Internal callers only.');
      if (!isUuidText(req.apiKeyId)) throw new DomainError('not_found', 'API key not found.');
      const key = await orm.em.fork().findOne(ApiKey, { id: req.apiKeyId });
      if (!key) throw new DomainError('not_found', 'API key not found.');
      return { apiKeyId: key.id, merchantId: key.merchantId, signingSecret: box.open(key.signingSecretSealed), revoked: key.revokedAt !== null, expiresAt: key.expiresAt?.toISOString() };
    },
  };
}
