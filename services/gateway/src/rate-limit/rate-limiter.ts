import type { FastifyReply, FastifyRequest } from 'fastify';
import { DomainError } from '@billing/contracts';
import { recordRateLimitRejection } from '@billing/telemetry';
import type { Logger } from '@billing/service-runtime';
import { credentialId, type Principal } from '../auth/principal.js';
import { KvBucketStore, type SharedBucketStore } from './kv-bucket-store.js';
import { LocalBucket, type RatePolicy } from './token-bucket.js';

export interface RateLimiterOptions {
  policy: RatePolicy;
  /** How often each active bucket is reconciled with the shared store. */
  syncMs: number;
  /** Absent: limits hold per replica only. */
  store?: SharedBucketStore;
  logger: Logger;
  /** Upper bound on buckets held in memory (the oldest is dropped beyond it). */
  maxBuckets?: number;
}

/** Syncs in flight at once, so a burst of new credentials cannot flood the store. */
const MAX_CONCURRENT_SYNCS = 256;
const WARN_EVERY_MS = 30_000;

/**
 * Per-credential (per client IP for anonymous requests) token buckets that hold across gateway
 * replicas without a network round trip per request: each request is decided against this
 * replica's copy of the bucket; every `syncMs` each bucket that saw requests adds what this
 * replica admitted to the shared bucket and adopts the shared level (which includes what every
 * other replica admitted). A bucket seen for the first time, again after an idle spell, or busy
 * (a tenth of a burst admitted since the last sync) is reconciled at once, in the background,
 * rather than at the next tick; at most one sync per bucket is in flight. Replicas can together
 * overshoot by what they admit while a sync is in flight (at most one burst each for a
 * credential none of them has seen); that overshoot is recorded as debt and repaid.
 *
 * When the shared store cannot be reached, every replica keeps limiting on its own (fail open
 * to per-replica limits, logged) and catches up when the store is back; requests never fail
 * because of the store.
 */
export class RateLimiter {
  private readonly buckets = new Map<string, LocalBucket>();
  private readonly maxBuckets: number;
  private readonly idleMs: number;
  private readonly eagerPushAt: number;
  private timer?: NodeJS.Timeout;
  private syncsInFlight = 0;
  private lastWarnAt = 0;

  constructor(private readonly opts: RateLimiterOptions) {
    this.maxBuckets = opts.maxBuckets ?? 100_000;
    // A bucket idle this long has refilled from any debt to full: forgetting it changes nothing.
    this.idleMs = Math.max(60_000, Math.ceil((2 * opts.policy.burst * 1000) / opts.policy.ratePerSecond));
    this.eagerPushAt = Math.max(1, Math.ceil(opts.policy.burst / 10));
  }

  start(): void {
    this.timer = setInterval(() => this.tick(), this.opts.syncMs);
    this.timer.unref();
  }

  async stop(): Promise<void> {
    clearInterval(this.timer);
    await this.opts.store?.close();
  }

  /** Admits one request for `key` or says how many whole seconds (at least 1) to wait. */
  check(key: string, now = Date.now()): { allowed: true; remaining: number } | { allowed: false; retryAfterSeconds: number } {
    let bucket = this.buckets.get(key);
    if (!bucket) {
      if (this.buckets.size >= this.maxBuckets) this.buckets.delete(this.buckets.keys().next().value!);
      bucket = new LocalBucket(this.opts.policy, now);
      this.buckets.set(key, bucket);
    }
    const decision = bucket.tryTake(now);
    // Reconcile now rather than at the next tick when this replica's view may be far off: it is
    // older than two sync intervals (a new bucket, or one waking from idle), or this replica has
    // admitted a tenth of a burst since (a busy credential: keeps replicas' views close).
    if (now - bucket.syncedAt > 2 * this.opts.syncMs || bucket.unpushed >= this.eagerPushAt) this.sync(key, bucket);
    return decision;
  }

  /** The `RequestPipeline.limitRate` step: throws `rate_limited` (429 with Retry-After) when over the limit. */
  limit(request: FastifyRequest, principal: Principal | undefined, reply?: FastifyReply): void {
    const key = principal ? credentialId(principal) : `ip:${request.ip}`;
    const decision = this.check(key);
    if (reply) {
      reply.header('ratelimit-limit', String(this.opts.policy.burst));
      reply.header('ratelimit-remaining', String(decision.allowed ? decision.remaining : 0));
    }
    if (!decision.allowed) {
      const seconds = decision.retryAfterSeconds;
      recordRateLimitRejection(principal ? 'credential' : 'anonymous');
      throw new DomainError('rate_limited', `Rate limit exceeded; retry in ${seconds} second(s).`, { retryAfterSeconds: seconds });
    }
  }

  private tick(): void {
    const now = Date.now();
    for (const [key, bucket] of this.buckets) {
      if (bucket.isIdle(now, this.idleMs)) this.buckets.delete(key);
      else if (!bucket.syncing && (bucket.unpushed > 0 || bucket.lastRequestAt > bucket.syncedAt)) this.sync(key, bucket);
    }
  }

  /** Starts reconciling one bucket in the background; never awaited by a request. */
  private sync(key: string, bucket: LocalBucket): void {
    const store = this.opts.store;
    if (!store || bucket.syncing || this.syncsInFlight >= MAX_CONCURRENT_SYNCS) return;
    bucket.syncing = true;
    this.syncsInFlight++;
    const pushed = bucket.unpushed;
    const started = Date.now();
    store
      .push(key, pushed, started)
      .then(
        (shared) => bucket.adopt(shared, pushed, Date.now()),
        (e: unknown) => {
          bucket.keepLocal();
          // Retried at the next tick, not on every request of this credential.
          bucket.syncedAt = started;
          if (started - this.lastWarnAt > WARN_EVERY_MS) {
            this.lastWarnAt = started;
            this.opts.logger.warn({ err: e }, 'rate-limit store unreachable; limiting per replica until it is back');
          }
        },
      )
      .finally(() => {
        bucket.syncing = false;
        this.syncsInFlight--;
      });
  }
}

/** The limiter configured by the gateway's env, shared through NATS KV; undefined when RATE_LIMIT_PER_SECOND is 0. */
export function createRateLimiter(
  config: { RATE_LIMIT_PER_SECOND: number; RATE_LIMIT_BURST: number; RATE_LIMIT_SYNC_MS: number; RATE_LIMIT_KV_BUCKET: string; NATS_URL: string },
  logger: Logger,
): RateLimiter | undefined {
  if (config.RATE_LIMIT_PER_SECOND <= 0) return undefined;
  const policy = { ratePerSecond: config.RATE_LIMIT_PER_SECOND, burst: config.RATE_LIMIT_BURST };
  // Stored buckets expire once they would have refilled from the deepest debt to full.
  const ttlMs = Math.max(60_000, Math.ceil((2 * policy.burst * 1000) / policy.ratePerSecond));
  const store = new KvBucketStore({ natsUrl: config.NATS_URL, bucket: config.RATE_LIMIT_KV_BUCKET, policy, ttlMs, logger });
  return new RateLimiter({ policy, syncMs: config.RATE_LIMIT_SYNC_MS, store, logger });
}
