import { z } from 'zod';
import { DateTime, PageQuery, Uuid } from './common.js';

export const DELIVERY_STATUSES = ['Pending', 'Succeeded', 'Failed'] as const;
export const DeliveryStatus = z.enum(DELIVERY_STATUSES, { message: 'Must be one of Pending, Succeeded, Failed.' });
export type DeliveryStatus = z.infer<typeof DeliveryStatus>;

export const ATTEMPT_TRIGGERS = ['Scheduled', 'Manual'] as const;

/** One HTTP POST of a delivery. `statusCode` is null when no response arrived (see `error`). */
export const WebhookAttempt = z
  .object({
    id: Uuid,
    attemptedAt: DateTime,
    trigger: z.enum(ATTEMPT_TRIGGERS),
    statusCode: z.number().int().nullable(),
    durationMs: z.number().int(),
    error: z.string().nullable(),
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
