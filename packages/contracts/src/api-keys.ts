import { z } from 'zod';
import { DateTime, NonBlankText, Uuid } from './common.js';
import { EVENT_TYPES } from './event-types.js';

export const ApiKey = z
  .object({
    id: Uuid,
    name: z.string().nullable(),
    keyPrefix: z.string().nullable(),
    signingSecretPrefix: z.string().nullable(),
    webhookUrl: z.string().nullable(),
    webhookEvents: z.array(z.string()).nullable(),
    webhookEnabled: z.boolean().meta({ description: 'Whether events are delivered to webhookUrl; always false for a revoked key, which gets no webhooks.' }),
    expiresAt: DateTime.nullable(),
    lastUsedAt: DateTime.nullable(),
    revokedAt: DateTime.nullable(),
    createdAt: DateTime,
  })
  .meta({ id: 'ApiKey' });
export type ApiKey = z.infer<typeof ApiKey>;

/** Returned once, at creation: the only time the plaintext key and signing secret exist. */
export const CreatedApiKey = ApiKey.extend({ key: z.string(), signingSecret: z.string() }).meta({ id: 'CreatedApiKey' });
export type CreatedApiKey = z.infer<typeof CreatedApiKey>;

const FutureDateTime = DateTime.refine((s) => Date.parse(s) > Date.now(), 'Must be in the future.');

export const AdminCreateApiKeyRequest = z
  .object({ name: NonBlankText(200), expiresAt: FutureDateTime.nullish() })
  .meta({ id: 'AdminCreateApiKeyRequest' });
export type AdminCreateApiKeyRequest = z.infer<typeof AdminCreateApiKeyRequest>;

export const CreateApiKeyRequest = AdminCreateApiKeyRequest.extend({ merchantId: Uuid }).meta({ id: 'CreateApiKeyRequest' });
export type CreateApiKeyRequest = z.infer<typeof CreateApiKeyRequest>;

export const ListApiKeysQuery = z.object({ merchantId: Uuid.optional() });

/**
 * Absent fields are left unchanged; `webhookUrl: null` clears the URL; `webhookEvents: null`
 * subscribes to every type and `[]` to none. Enabling requires a URL.
 */
export const WebhookSettings = z.object({
    webhookUrl: z.url({ message: 'Must be an absolute URL.' }).max(2048, 'Must be at most 2048 characters.').nullish(),
    webhookEvents: z
      .array(z.string().refine((t) => (EVENT_TYPES as readonly string[]).includes(t), 'Unknown event type.'))
      .max(EVENT_TYPES.length * 2)
      .nullish(),
    webhookEnabled: z.boolean().optional(),
});
export type WebhookSettings = z.infer<typeof WebhookSettings>;

export const UpdateWebhookRequest = WebhookSettings.extend({ id: Uuid, merchantId: Uuid }).meta({ id: 'UpdateWebhookRequest' });
export type UpdateWebhookRequest = z.infer<typeof UpdateWebhookRequest>;
