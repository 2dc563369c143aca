import { z } from 'zod';
import { DateTime, PageQuery, Uuid } from './common.js';

export const DELIVERY_STATUSES = ['Pending', 'Succeeded', 'Failed'] as const;
export const DeliveryStatus = z.enum(DELIVERY_STATUSES, { message: 'Must be one of Pending, Succeeded, Failed.' });
export type DeliveryStatus = z.infer<typeof DeliveryStatus>;

export const ATTEMPT_TRIGGERS = ['Scheduled', 'Manual'] as const;

/**
 * Why an attempt failed, as a category (never the raw error text, which would make attempts an
 * internal port scanner): `timeout` (no 2xx in time), `connection_refused` (the connection could
 * not be made or was dropped), `tls_error`, `dns_error` (the host does not resolve),
 * `address_refused` (the egress policy refused the address; nothing was sent) and `http_status`
 * (a response that was not 2xx, redirects included).
 */
export const ATTEMPT_ERRORS = ['timeout', 'connection_refused', 'connection_reset', 'tls_error', 'dns_error', 'address_refused', 'http_status'] as const;
export type AttemptError = (typeof ATTEMPT_ERRORS)[number];

/** One HTTP POST of a delivery. `statusCode` is null when no response arrived (see `error`). */
export const WebhookAttempt = z
  .object({
    id: Uuid,
    attemptedAt: DateTime,
    trigger: z.enum(ATTEMPT_TRIGGERS),
    statusCode: z.number().int().nullable(),
    durationMs: z.number().int(),
    /** Null on success. */
    error: z.enum(ATTEMPT_ERRORS).nullable(),
    /** The first 1 KiB of the response body. */
    responseBody: z.string().nullable(),
  })
  .meta({ id: 'WebhookAttempt' });
export type WebhookAttempt = z.infer<typeof WebhookAttempt>;

/** One event sent to one API key's webhook endpoint, with its attempts (oldest first). */
export const WebhookDelivery = z
  .object({
    id: Uuid,
    eventId: Uuid,
    eventType: z.string(),
    apiKeyId: Uuid,
    url: z.string(),
    status: DeliveryStatus,
    attemptCount: z.number().int(),
    nextAttemptAt: DateTime.nullable(),
    createdAt: DateTime,
    attempts: z.array(WebhookAttempt),
  })
  .meta({ id: 'WebhookDelivery' });
export type WebhookDelivery = z.infer<typeof WebhookDelivery>;

export const ListWebhookDeliveriesQuery = PageQuery.extend({
  merchantId: Uuid.optional(),
  status: DeliveryStatus.optional(),
  eventType: z.string().trim().min(1).max(100).optional(),
});

export const ReplayAccepted = z.object({ attemptId: Uuid }).meta({ id: 'WebhookReplayAccepted' });
export type ReplayAccepted = z.infer<typeof ReplayAccepted>;
