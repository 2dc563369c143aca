import { randomUUID } from 'node:crypto';
import type { Logger } from '@billing/service-runtime';
import { extractTraceContext, recordWebhookAttempt, ROOT_CONTEXT, untraced, withSpan } from '@billing/telemetry';
import { signatureHeaders } from '../signing/signature.js';
import type { AttemptRecorder } from './attempt-recorder.js';
import type { DeliveryJob } from './delivery-job.js';
import type { HttpSender } from './http-sender.js';

export interface DispatcherLimits {
  /** Requests in flight over all endpoints. */
  global: number;
  /** Requests in flight to one endpoint. */
  perEndpoint: number;
  timeoutMs: number;
}

interface SigningKeys {
  keyFor(apiKeyId: string, merchantId: string): Promise<Buffer>;
}

interface EndpointQueue {
  active: number;
  queue: DeliveryJob[];
}

/**
 * Queue depths, in multiples of the per-endpoint (or global) concurrency. New events are started
 * at once while their endpoint has fewer than FAST_PATH_DEPTH × perEndpoint jobs here; beyond
 * that they wait in the database for the scheduler, which takes CLAIM_DEPTH × perEndpoint of an
 * endpoint at a time and looks again when the endpoint is down to DRAINED_DEPTH × perEndpoint.
 */
const FAST_PATH_DEPTH = 64;
const CLAIM_DEPTH = 4;
const DRAINED_DEPTH = 2;
const QUEUE_DEPTH = 16;

/** Wait before trying again when a key's signing secret could not be fetched. */
const SECRET_UNAVAILABLE_RETRY_MS = 5000;

/**
 * Runs attempts with bounded concurrency: at most `perEndpoint` requests in flight to one API
 * key's endpoint and `global` in all. Each endpoint has its own queue, and a freed slot goes
 * first to endpoints that were waiting for one, so a slow or dead receiver occupies at most its
 * own share and never delays deliveries to others.
 */
export class Dispatcher {
  private readonly endpoints = new Map<string, EndpointQueue>();
  /** Endpoints with queued work that found the global pool full, in arrival order. */
  private readonly waiting = new Set<string>();
  private active = 0;
  private queued = 0;
  private closing = false;
  private idleWaiters: (() => void)[] = [];

  constructor(
    private readonly deps: { sender: HttpSender; keys: SigningKeys; recorder: AttemptRecorder; logger: Logger },
    private readonly limits: DispatcherLimits,
  ) {}

  /**
   * Whether a new job for this endpoint would be started soon (else it is left to the scheduler);
   * `planned` counts jobs about to be submitted for it.
   */
  hasRoomFor(apiKeyId: string, planned = 0): boolean {
    return !this.closing && this.load(apiKeyId) + planned < this.limits.perEndpoint * FAST_PATH_DEPTH && this.queued < this.limits.global * QUEUE_DEPTH;
  }

  /** How many more jobs the scheduler may hand over. */
  room(): number {
    return this.closing ? 0 : Math.max(0, this.limits.global * QUEUE_DEPTH - this.queued - this.active);
  }

  /** Endpoints with enough work here already; the scheduler takes no more of theirs until they drain. */
  busyEndpoints(): string[] {
    return [...this.endpoints.keys()].filter((k) => this.load(k) >= this.limits.perEndpoint * CLAIM_DEPTH);
  }

  /** Called when a busy endpoint has drained enough to take more work (the scheduler looks again). */
  onDrained: (() => void) | undefined;

  private load(apiKeyId: string): number {
    const ep = this.endpoints.get(apiKeyId);
    return ep ? ep.active + ep.queue.length : 0;
  }

  get inFlight(): number {
    return this.active;
  }

  submit(job: DeliveryJob): void {
    if (this.closing) {
      this.deps.recorder.release([job]);
      return;
    }
    let ep = this.endpoints.get(job.apiKeyId);
    if (!ep) {
      ep = { active: 0, queue: [] };
      this.endpoints.set(job.apiKeyId, ep);
    }
    ep.queue.push(job);
    this.queued++;
    this.pump(job.apiKeyId);
  }

  /** Stops taking work, gives back queued jobs, and waits (up to `timeoutMs`) for requests in flight. */
  async close(timeoutMs: number): Promise<void> {
    this.closing = true;
    const unstarted = [...this.endpoints.values()].flatMap((ep) => ep.queue.splice(0));
    this.queued = 0;
    if (unstarted.length) this.deps.recorder.release(unstarted);
    if (this.active > 0) {
      await Promise.race([new Promise<void>((r) => this.idleWaiters.push(r)), new Promise((r) => setTimeout(r, timeoutMs))]);
    }
  }

  private pump(apiKeyId: string): void {
    const ep = this.endpoints.get(apiKeyId);
    if (!ep) return;
    while (ep.queue.length && ep.active < this.limits.perEndpoint) {
      if (this.active >= this.limits.global) {
        this.waiting.add(apiKeyId);
        return;
      }
      const job = ep.queue.shift()!;
      this.queued--;
      ep.active++;
      this.active++;
      void this.attempt(job)
        .catch((e) => this.deps.logger.error({ err: e, deliveryId: job.deliveryId }, 'webhook attempt crashed'))
        .finally(() => {
          ep.active--;
          this.active--;
          if (ep.active + ep.queue.length === this.limits.perEndpoint * DRAINED_DEPTH - 1) this.onDrained?.();
          this.slotFreed(apiKeyId);
        });
    }
    if (!ep.queue.length && !ep.active) this.endpoints.delete(apiKeyId);
  }

  private slotFreed(apiKeyId: string): void {
    for (const key of this.waiting) {
      if (this.active >= this.limits.global) break;
      this.waiting.delete(key);
      this.pump(key);
    }
    this.pump(apiKeyId);
    if (this.active === 0) for (const done of this.idleWaiters.splice(0)) done();
  }

  /**
   * An attempt made as its event is processed continues that trace (the POST carries its
   * `traceparent`); retries and replays come from the scheduler's polling and are not traced.
   */
  private attempt(job: DeliveryJob): Promise<void> {
    if (!job.traceContext) return untraced(() => this.deliver(job));
    const parent = extractTraceContext(job.traceContext, ROOT_CONTEXT);
    return withSpan(`deliver ${job.eventType}`, { parent, attributes: { 'webhook.delivery.id': job.deliveryId, 'webhook.event.id': job.eventId } }, () => this.deliver(job));
  }

  private async deliver(job: DeliveryJob): Promise<void> {
    // Too close to the end of our lease: another replica may take it any moment.
    if (Date.now() > job.leaseUntil - this.limits.timeoutMs - 1000) return;
    let key: Buffer;
    try {
      key = await this.deps.keys.keyFor(job.apiKeyId, job.merchantId);
    } catch (e) {
      this.deps.logger.warn({ err: e, apiKeyId: job.apiKeyId }, 'signing secret unavailable; attempt postponed');
      this.deps.recorder.postpone(job, SECRET_UNAVAILABLE_RETRY_MS);
      return;
    }
    const attemptedAt = new Date();
    const headers = signatureHeaders(key, job.eventId, Math.floor(attemptedAt.getTime() / 1000), job.body);
    const outcome = await this.deps.sender.send(job.url, headers, job.body);
    recordWebhookAttempt(outcome.ok ? 'succeeded' : outcome.statusCode ? 'http_error' : 'failed', outcome.statusCode, outcome.durationMs / 1000, job.eventType);
    this.deps.recorder.record({ job, attemptId: job.replayId ?? randomUUID(), attemptedAt, outcome });
  }
}
