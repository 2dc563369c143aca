import { randomUUID } from 'node:crypto';
import { EntitySchema } from '@mikro-orm/postgresql';
import type { AttemptError, DeliveryStatus } from '@billing/contracts';
import type { RetryPolicy } from './retry-policy.js';

export type AttemptTrigger = 'Scheduled' | 'Manual';

/**
 * One event sent to one API key's endpoint. Created Pending when the event is consumed; each
 * scheduled attempt either succeeds it or schedules the next one, until the retry schedule is
 * used up and it is Failed. Manual attempts (replays) never move the schedule; a successful
 * one makes the delivery Succeeded.
 */
export class Delivery {
  id: string = randomUUID();
  eventId!: string;
  eventType!: string;
  merchantId!: string;
  apiKeyId!: string;
  /** The endpoint URL of the latest attempt (attempts follow the key's current URL). */
  url!: string;
  status: DeliveryStatus = 'Pending';
  scheduledAttempts = 0;
  nextAttemptAt: Date | null = new Date();
  /** Until when a webhooks replica owns the delivery (it is attempting it); null when none does. */
  leaseUntil: Date | null = null;
  createdAt: Date = new Date();
  updatedAt: Date = new Date();
}

export class Attempt {
  id: string = randomUUID();
  deliveryId!: string;
  attemptedAt!: Date;
  trigger!: AttemptTrigger;
  statusCode: number | null = null;
  durationMs!: number;
  error: AttemptError | null = null;
  responseBody: string | null = null;
}

/** What one HTTP POST came to. */
export interface AttemptOutcome {
  /** A 2xx response within the timeout. */
  ok: boolean;
  statusCode: number | null;
  durationMs: number;
  /** Why it failed, as a category; null on success. */
  error: AttemptError | null;
  /** The first 1 KiB of the response body (null when no response arrived). */
  responseBody: string | null;
  /** From `Retry-After` on a 429 or 503. */
  retryAfterMs?: number;
}

/** The change an attempt makes to its delivery; `status` undefined leaves the delivery as it is. */
export interface DeliveryTransition {
  status?: DeliveryStatus;
  scheduledAttempts?: number;
  /** Set (also to null) only when the schedule changes. */
  nextAttemptAt?: Date | null;
}

/**
 * The delivery's next state after an attempt. `scheduledAttempts` is the number of scheduled
 * attempts made before this one.
 */
export function transitionAfter(trigger: AttemptTrigger, scheduledAttempts: number, outcome: AttemptOutcome, policy: RetryPolicy, now = new Date()): DeliveryTransition {
  if (trigger === 'Manual') return outcome.ok ? { status: 'Succeeded', nextAttemptAt: null } : {};
  const made = scheduledAttempts + 1;
  if (outcome.ok) return { status: 'Succeeded', scheduledAttempts: made, nextAttemptAt: null };
  const next = policy.nextAttemptAt(made, now, outcome.retryAfterMs);
  return next ? { status: 'Pending', scheduledAttempts: made, nextAttemptAt: next } : { status: 'Failed', scheduledAttempts: made, nextAttemptAt: null };
}

export const DeliverySchema = new EntitySchema<Delivery>({
  class: Delivery,
  tableName: 'deliveries',
  properties: {
    id: { type: 'uuid', primary: true },
    eventId: { type: 'uuid' },
    eventType: { type: 'string' },
    merchantId: { type: 'uuid' },
    apiKeyId: { type: 'uuid' },
    url: { type: 'text' },
    status: { type: 'string' },
    scheduledAttempts: { type: 'integer' },
    nextAttemptAt: { type: 'Date', columnType: 'timestamptz', nullable: true },
    leaseUntil: { type: 'Date', columnType: 'timestamptz', nullable: true },
    createdAt: { type: 'Date', columnType: 'timestamptz' },
    updatedAt: { type: 'Date', columnType: 'timestamptz' },
  },
});

export const AttemptSchema = new EntitySchema<Attempt>({
  class: Attempt,
  tableName: 'attempts',
  properties: {
    id: { type: 'uuid', primary: true },
    deliveryId: { type: 'uuid' },
    attemptedAt: { type: 'Date', columnType: 'timestamptz' },
    trigger: { type: 'string' },
    statusCode: { type: 'integer', nullable: true },
    durationMs: { type: 'integer' },
    error: { type: 'text', nullable: true },
    responseBody: { type: 'text', nullable: true },
  },
});

/** A queued manual replay; its id becomes the id of the attempt it makes. */
export class Replay {
  id: string = randomUUID();
  deliveryId!: string;
  requestedAt: Date = new Date();
  leaseUntil: Date | null = null;
}

export const ReplaySchema = new EntitySchema<Replay>({
  class: Replay,
  tableName: 'replays',
  properties: {
    id: { type: 'uuid', primary: true },
    deliveryId: { type: 'uuid' },
    requestedAt: { type: 'Date', columnType: 'timestamptz' },
    leaseUntil: { type: 'Date', columnType: 'timestamptz', nullable: true },
  },
});
