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
