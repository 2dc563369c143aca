import { z } from 'zod';
import { DateTime, hasNonUriCharacter, NonBlankText, Uuid } from './common.js';
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
 * An absolute URL, stored exactly as sent. Not `z.url()`, which trims the value before checking
 * it, so ' https://x/h ' was stored as 'https://x/h': whitespace and control characters, which no
 * URI holds (RFC 3986), are refused instead, wherever they are.
 */
const WebhookUrl = z
  .string()
  .max(2048, 'Must be at most 2048 characters.')
  .refine((s) => !hasNonUriCharacter(s) && URL.canParse(s), 'Must be an absolute URL.')
  .meta({ format: 'uri' });

/**
 * Absent fields are left unchanged; `webhookUrl: null` clears the URL; `webhookEvents: null`
 * subscribes to every type and `[]` to none. Enabling requires a URL.
 */
export const WebhookSettings = z.object({
    webhookUrl: WebhookUrl.nullish(),
    webhookEvents: z
      .array(z.string().refine((t) => (EVENT_TYPES as readonly string[]).includes(t), 'Unknown event type.'))
      .max(EVENT_TYPES.length * 2)
      .nullish(),
    webhookEnabled: z.boolean().optional(),
});
export type WebhookSettings = z.infer<typeof WebhookSettings>;

export const UpdateWebhookRequest = WebhookSettings.extend({ id: Uuid, merchantId: Uuid }).meta({ id: 'UpdateWebhookRequest' });
export type UpdateWebhookRequest = z.infer<typeof UpdateWebhookRequest>;
