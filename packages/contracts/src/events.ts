import { z } from 'zod';
import { DateTime, Uuid } from './common.js';
import { EVENT_TYPES } from './event-types.js';

/**
 * The one envelope of every integration event on the bus (subject `events.<type>`), with W3C
 * trace context in the NATS message headers. `id` is the outbox id and the JetStream
 * `Nats-Msg-Id`, so consumers de-duplicate on it.
 */
export const EventEnvelope = z.object({
  id: Uuid,
  type: z.string(),
  /**
   * Version of the `data` schema of this type (`EVENT_VERSIONS`). Events published before
   * versions existed carry none and are version 1. A consumer handles every version it has
   * seen deployed; a producer only adds fields within a version (see the compatibility test).
   */
  version: z.number().int().min(1).default(1),
  occurredAt: DateTime,
  merchantId: Uuid,
  data: z.record(z.string(), z.unknown()),
});
export type EventEnvelope = z.infer<typeof EventEnvelope>;

/** JetStream stream holding every integration event. */
export const EVENTS_STREAM = 'EVENTS';
export const EVENT_SUBJECT_PREFIX = 'events.';
export const eventSubject = (type: string) => EVENT_SUBJECT_PREFIX + type;

export const isWebhookEventType = (t: string): boolean => (EVENT_TYPES as readonly string[]).includes(t);

/**
 * The body of every webhook POST (Standard Webhooks): `id` is the event id (also the
 * `webhook-id` header, the same on every attempt), `timestamp` the time the event occurred.
 */
export const WebhookPayload = z
  .object({
    id: Uuid,
    type: z.enum(EVENT_TYPES),
    timestamp: DateTime,
    merchantId: Uuid,
    data: z.record(z.string(), z.unknown()),
  })
  .meta({ id: 'WebhookPayload' });
export type WebhookPayload = z.infer<typeof WebhookPayload>;

/**
 * Internal events of identity describing an API key's webhook endpoint. They feed the webhooks
 * service's read model of endpoints; they are not webhook types (not in EVENT_TYPES) and are
 * never delivered to merchants.
 */
export const API_KEY_EVENT_TYPES = ['api_key.created', 'api_key.webhook_configured', 'api_key.revoked'] as const;
export type ApiKeyEventType = (typeof API_KEY_EVENT_TYPES)[number];
export const isApiKeyEventType = (t: string): t is ApiKeyEventType => (API_KEY_EVENT_TYPES as readonly string[]).includes(t);

/**
 * Payload (`data`) of every `api_key.*` event: the key's complete endpoint state after the
 * change. `version` increases with every change of the key, so a consumer keeps the state with
 * the highest version whatever order the events arrive in. Never carries the signing secret.
 */
export const ApiKeyEndpointState = z.object({
  apiKeyId: Uuid,
  merchantId: Uuid,
  webhookUrl: z.string().nullable(),
  /** null: every event type; []: none. */
  webhookEvents: z.array(z.string()).nullable(),
  webhookEnabled: z.boolean(),
  revoked: z.boolean(),
  version: z.number().int().min(1),
});
export type ApiKeyEndpointState = z.infer<typeof ApiKeyEndpointState>;
