import type { AttemptTrigger } from './delivery.js';

/** A delivery attempt this replica owns until `leaseUntil` (ms since the epoch). */
export interface DeliveryJob {
  deliveryId: string;
  eventId: string;
  eventType: string;
  apiKeyId: string;
  /** The merchant of the event and of the API key (the scope its signing secret is read in). */
  merchantId: string;
  url: string;
  /** The webhook body, byte for byte the same on every attempt. */
  body: string;
  trigger: AttemptTrigger;
  /** Manual attempts: the queued replay, whose id becomes the attempt's id. */
  replayId?: string;
  /** Scheduled attempts made before this one. */
  scheduledAttempts: number;
  leaseUntil: number;
  /** `traceparent`/`tracestate` of the event's processing, which the attempt continues; absent for scheduled retries and replays. */
  traceContext?: Record<string, string>;
}
