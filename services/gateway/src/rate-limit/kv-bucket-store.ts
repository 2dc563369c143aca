import { createHash } from 'node:crypto';
import { jetstream } from '@nats-io/jetstream';
import { Kvm, type KV } from '@nats-io/kv';
import { connect, type NatsConnection } from '@nats-io/transport-node';
import { natsServerOptions, type Logger } from '@billing/service-runtime';
import { addConsumption, fullBucket, refill, type BucketState, type RatePolicy } from './token-bucket.js';

/** The shared side of the rate limiter: every replica adds what it admitted and reads the total. */
export interface SharedBucketStore {
  /**
   * Adds `consumed` tokens to the shared bucket of `key` and returns its state afterwards (with
   * `consumed` 0: only reads it). Throws when the store cannot be reached.
   */
  push(key: string, consumed: number, now: number, policy: RatePolicy): Promise<BucketState>;
  close(): Promise<void>;
}

/** CAS attempts before a push gives up (another replica kept winning the race). */
const MAX_CAS_ATTEMPTS = 5;
/** Every KV operation is bounded; a slow store degrades to local limiting, never to slow requests. */
const KV_TIMEOUT_MS = 1000;

interface StoredBucket {
  /** level */
  l: number;
  /** at (ms) */
  t: number;
}

function isCasConflict(e: unknown): boolean {
  return /wrong last sequence|key exists/i.test((e as Error)?.message ?? '');
}

/** At most one re-creation of a lost bucket per this many ms. */
const RECREATE_INTERVAL_MS = 1000;

/**
 * Shared buckets in a JetStream key-value bucket (in memory, one value per credential, expiring
 * after `ttlMs` without writes: an idle bucket is full again long before). Each push is a read,
 * then an optimistic write conditional on the revision read, retried on a lost race.
 *
 * The connection is made in the background and re-made by the client on loss; until it is up,
 * `push` throws and the limiter keeps limiting per replica.
 */
export class KvBucketStore implements SharedBucketStore {
  private nc?: NatsConnection;
  private kv?: KV;
  private closed = false;
  private readonly ready: Promise<void>;
  private recreating?: Promise<void>;
  private lastRecreate = 0;

  constructor(
    private readonly opts: { natsUrl: string; bucket: string; ttlMs: number; logger: Logger },
  ) {
    this.ready = this.open();
    this.ready.catch(() => undefined);
  }

  /** The bucket (made if missing; the same bucket when it exists). */
  private createBucket(nc: NatsConnection): Promise<KV> {
    const { bucket, ttlMs } = this.opts;
    return new Kvm(jetstream(nc, { timeout: KV_TIMEOUT_MS })).create(bucket, { history: 1, ttl: ttlMs, storage: 'memory', timeout: KV_TIMEOUT_MS });
  }

  /**
   * Makes the bucket again after NATS lost it (a restarted server keeps no memory stream). Until
   * this, every push after a NATS restart failed and the gateway limited per replica for good.
   */
  private recreate(): void {
    const nc = this.nc;
    if (!nc || this.closed || this.recreating || Date.now() - this.lastRecreate < RECREATE_INTERVAL_MS) return;
    this.lastRecreate = Date.now();
    this.recreating = this.createBucket(nc)
      .then((kv) => {
        this.kv = kv;
        this.opts.logger.debug({ bucket: this.opts.bucket }, 'rate-limit bucket opened again (made anew if NATS had lost it)');
      })
      .catch(() => undefined)
      .finally(() => {
        this.recreating = undefined;
      });
  }

  private async open(): Promise<void> {
    const { natsUrl, bucket, logger } = this.opts;
    for (let attempt = 0; !this.closed; attempt++) {
      try {
        // No stack capture per request: every KV get and update is one, and without it each
        // built a TimeoutError and a RequestError in advance (a tenth of the gateway's CPU when
        // every request is a new credential, as in checkout completions).
        this.nc ??= await connect({ ...natsServerOptions(natsUrl), name: 'gateway-rate-limit', noAsyncTraces: true, maxReconnectAttempts: -1, reconnectTimeWait: 500, waitOnFirstConnect: true });
        if (this.closed) break;
        this.kv = await this.createBucket(this.nc);
        logger.info({ bucket }, 'rate limits shared through NATS KV');
        return;
      } catch (e) {
        logger.warn({ err: e, attempt }, 'rate-limit store not available yet; limiting per replica meanwhile');
        await new Promise((r) => setTimeout(r, Math.min(5000, 250 * 2 ** attempt)).unref());
      }
    }
  }

  /** KV keys allow a restricted alphabet; credential ids and IPs are hashed into it. */
  private keyOf(key: string): string {
    return `b.${createHash('sha256').update(key).digest('hex').slice(0, 40)}`;
  }

  async push(key: string, consumed: number, now: number, policy: RatePolicy): Promise<BucketState> {
    try {
      return await this.pushTo(key, consumed, now, policy);
    } catch (e) {
      // A bucket NATS lost answers nothing at all (its gets and creates time out, an update says
      // JetStream is not enabled), like a slow server: so after any failure the bucket is made
      // again (idempotent: an existing one is only opened), once a second at most.
      this.recreate();
      throw e;
    }
  }

  private async pushTo(key: string, consumed: number, now: number, policy: RatePolicy): Promise<BucketState> {
    const kv = this.kv;
    if (!kv) throw new Error('rate-limit store not connected');
    const k = this.keyOf(key);
    for (let attempt = 1; ; attempt++) {
      const entry = await kv.get(k);
      const stored = entry && entry.operation === 'PUT' && entry.length > 0 ? entry.json<StoredBucket>() : undefined;
      const current = stored && Number.isFinite(stored.l) && Number.isFinite(stored.t) ? { level: stored.l, at: stored.t } : undefined;
      if (consumed === 0) return current ? refill(current, policy, now) : fullBucket(policy, now);
      const next = addConsumption(current, consumed, policy, now);
      const value = JSON.stringify({ l: next.level, t: next.at } satisfies StoredBucket);
      try {
        if (entry) await kv.update(k, value, entry.revision, KV_TIMEOUT_MS);
        else await kv.create(k, value);
        return next;
      } catch (e) {
        if (!isCasConflict(e) || attempt >= MAX_CAS_ATTEMPTS) throw e;
      }
    }
  }

  async close(): Promise<void> {
    this.closed = true;
    await this.nc?.close().catch(() => undefined);
  }
}
