import type { Logger } from '@billing/service-runtime';
import type { SharedBucketStore } from './kv-bucket-store.js';
import { LocalBucket, type RatePolicy } from './token-bucket.js';

export interface RateLimiterOptions {
  /** Names the limit in the RateLimit headers and separates its buckets in the shared store. */
  name: string;
  policy: RatePolicy;
  /** How often each active bucket is reconciled with the shared store. */
  syncMs: number;
  /** Absent: limits hold per replica only. */
  store?: SharedBucketStore;
  logger: Logger;
  /** Upper bound on buckets held in memory (the oldest is dropped beyond it). */
  maxBuckets?: number;
  /**
   * Also re-read, at every sync, buckets this replica has not counted in since its last sync
   * (while it counted in them in the last FOLLOW_WINDOW_MS), so what other replicas counted is
   * seen within one sync interval by a replica that only peeks now. For low-volume limits (failed
   * authentications, password endpoints), where a replica that is not the one counting must
   * still refuse promptly.
   */
  followShared?: boolean;
}

/** How long after its last use a followed bucket keeps being re-read. */
const FOLLOW_WINDOW_MS = 10_000;

/** A limiter's answer for one key, with what the RateLimit response header reports. */
export type RateDecision = ({ allowed: true } | { allowed: false; retryAfterSeconds: number }) & {
  limiter: RateLimiter;
  remaining: number;
  resetSeconds: number;
};

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

  /** Stops syncing; the shared store is closed by its owner. */
  stop(): void {
    clearInterval(this.timer);
  }

  get name(): string {
    return this.opts.name;
  }

  get policy(): RatePolicy {
    return this.opts.policy;
  }

  private bucketOf(key: string, now: number): LocalBucket {
    let bucket = this.buckets.get(key);
    if (!bucket) {
      if (this.buckets.size >= this.maxBuckets) this.buckets.delete(this.buckets.keys().next().value!);
      bucket = new LocalBucket(this.opts.policy, now);
      this.buckets.set(key, bucket);
    }
    return bucket;
  }

  private decided(bucket: LocalBucket, decision: { allowed: true } | { allowed: false; retryAfterSeconds: number }, now: number): RateDecision {
    return { ...decision, limiter: this, ...bucket.remaining(now) };
  }

  /** Whether `key` could be admitted, without taking a token (for limits charged only on failure). */
  peek(key: string, now = Date.now()): RateDecision {
    const bucket = this.bucketOf(key, now);
    if (now - bucket.syncedAt > 2 * this.opts.syncMs) this.sync(key, bucket);
    return this.decided(bucket, bucket.peek(now), now);
  }

  /** Counts an event for `key` that already happened (a failed authentication), admitted or not. */
  charge(key: string, now = Date.now()): void {
    const bucket = this.bucketOf(key, now);
    bucket.charge(now);
    this.sync(key, bucket);
  }

  /** Gives `key` its whole allowance back (an event reset the count), here and in the shared bucket. */
  restore(key: string, now = Date.now()): void {
    const bucket = this.buckets.get(key);
    if (!bucket && !this.opts.store) return;
    const b = bucket ?? this.bucketOf(key, now);
    b.restore(now);
    this.sync(key, b);
  }

  /** Admits one request for `key` or says how many whole seconds (at least 1) to wait. */
  check(key: string, now = Date.now()): RateDecision {
    const bucket = this.bucketOf(key, now);
    const decision = bucket.tryTake(now);
    // Reconcile now rather than at the next tick when this replica's view may be far off: it is
    // older than two sync intervals (a new bucket, or one waking from idle), or this replica has
    // admitted a tenth of a burst since (a busy credential: keeps replicas' views close).
    if (now - bucket.syncedAt > 2 * this.opts.syncMs || bucket.unpushed >= this.eagerPushAt) this.sync(key, bucket);
    return this.decided(bucket, decision, now);
  }

  private tick(): void {
    const now = Date.now();
    for (const [key, bucket] of this.buckets) {
      if (bucket.isIdle(now, this.idleMs)) this.buckets.delete(key);
      else if (!bucket.syncing && (bucket.unpushed !== 0 || bucket.lastRequestAt > bucket.syncedAt)) this.sync(key, bucket);
      else if (this.opts.followShared && !bucket.syncing && now - bucket.lastRequestAt < FOLLOW_WINDOW_MS) this.sync(key, bucket);
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
      .push(`${this.opts.name}:${key}`, pushed, started, this.opts.policy)
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
