/**
 * Token-bucket arithmetic of the rate limiter, free of I/O so it can be reasoned about and tested
 * on its own. A bucket holds up to `burst` tokens and refills at `ratePerSecond`; a request takes
 * one token. Levels may go negative (down to -burst): that is debt left by replicas that admitted
 * requests on a stale view of the shared bucket, repaid before anyone is admitted again.
 */
export interface RatePolicy {
  ratePerSecond: number;
  burst: number;
}

/** `level` tokens at time `at` (ms since the epoch). */
export interface BucketState {
  level: number;
  at: number;
}

export function fullBucket(policy: RatePolicy, now: number): BucketState {
  return { level: policy.burst, at: now };
}

/** The state refilled up to `now` (never above `burst`; time running backwards adds nothing). */
export function refill(state: BucketState, policy: RatePolicy, now: number): BucketState {
  const elapsed = Math.max(0, now - state.at);
  return { level: Math.min(policy.burst, state.level + (elapsed * policy.ratePerSecond) / 1000), at: Math.max(state.at, now) };
}

/** Whole seconds (at least 1) until a bucket at `level` holds one token. */
export function secondsUntilToken(level: number, policy: RatePolicy): number {
  return Math.max(1, Math.ceil((1 - level) / policy.ratePerSecond));
}

/**
 * The shared bucket after a replica adds the `consumed` tokens it admitted since its last sync:
 * the stored state refilled to `now`, minus them, floored at -burst so a long outage of the
 * store does not turn into an unbounded penalty. A missing state is a full bucket.
 */
export function addConsumption(shared: BucketState | undefined, consumed: number, policy: RatePolicy, now: number): BucketState {
  const current = refill(shared ?? fullBucket(policy, now), policy, now);
  // `consumed` is negative for tokens given back (a restore): never above a full bucket.
  return { level: Math.min(policy.burst, Math.max(-policy.burst, current.level - consumed)), at: current.at };
}

/**
 * One credential's bucket as one replica sees it: the shared level as of the last sync, minus
 * what this replica admitted since (`unpushed`), refilling locally in between. Decisions never
 * wait for the shared store.
 */
export class LocalBucket {
  state: BucketState;
  /** Tokens admitted here and not yet added to the shared bucket. */
  unpushed = 0;
  lastRequestAt: number;
  syncedAt = 0;
  syncing = false;

  constructor(
    private readonly policy: RatePolicy,
    now: number,
  ) {
    this.state = fullBucket(policy, now);
    this.lastRequestAt = now;
  }

  /** Admits a request (taking a token) or says how long to wait. */
  tryTake(now: number): { allowed: true; remaining: number } | { allowed: false; retryAfterSeconds: number } {
    this.lastRequestAt = now;
    const current = refill(this.state, this.policy, now);
    if (current.level < 1) {
      this.state = current;
      return { allowed: false, retryAfterSeconds: secondsUntilToken(current.level, this.policy) };
    }
    this.state = { level: current.level - 1, at: current.at };
    this.unpushed += 1;
    return { allowed: true, remaining: Math.max(0, Math.floor(this.state.level)) };
  }

  /** Whether a request could be admitted now, without taking a token. */
  peek(now: number): { allowed: true } | { allowed: false; retryAfterSeconds: number } {
    const current = refill(this.state, this.policy, now);
    return current.level < 1 ? { allowed: false, retryAfterSeconds: secondsUntilToken(current.level, this.policy) } : { allowed: true };
  }

  /** Takes a token whatever the level (down to -burst): counts an event that already happened, such as a failed authentication. */
  charge(now: number): void {
    this.lastRequestAt = now;
    const current = refill(this.state, this.policy, now);
    this.state = { level: Math.max(-this.policy.burst, current.level - 1), at: current.at };
    this.unpushed += 1;
  }

  /**
   * Fills the bucket at once (a count that an event resets, such as a successful sign-in for the
   * failed ones): the tokens given back are pushed as negative consumption, so the shared bucket
   * is refilled too (its level is capped at `burst` on the next read).
   */
  restore(now: number): void {
    this.lastRequestAt = now;
    const current = refill(this.state, this.policy, now);
    this.unpushed -= this.policy.burst - current.level;
    this.state = { level: this.policy.burst, at: current.at };
  }

  /** Whole tokens left now (never negative) and whole seconds until the bucket is full again. */
  remaining(now: number): { remaining: number; resetSeconds: number } {
    const { level } = refill(this.state, this.policy, now);
    return { remaining: Math.max(0, Math.floor(level)), resetSeconds: Math.max(0, Math.ceil(((this.policy.burst - level) * 1000) / this.policy.ratePerSecond / 1000)) };
  }

  /**
   * Adopts the shared state written (or read) by a sync that pushed `pushed` tokens; tokens
   * admitted while the sync was in flight stay unpushed and are subtracted from the new view.
   */
  adopt(shared: BucketState, pushed: number, now: number): void {
    // What changed here while the sync was in flight: tokens taken (positive) or given back by a
    // restore (negative), still to push.
    this.unpushed -= pushed;
    const current = refill(shared, this.policy, now);
    this.state = { level: Math.min(this.policy.burst, Math.max(-this.policy.burst, current.level - this.unpushed)), at: current.at };
    this.syncedAt = now;
  }

  /** After a failed sync: keep limiting locally; do not let the debt to push grow past one burst. */
  keepLocal(): void {
    this.unpushed = Math.max(-this.policy.burst, Math.min(this.unpushed, this.policy.burst));
  }

  /** Nothing to push and idle long enough that the bucket is full again: safe to forget. */
  isIdle(now: number, idleMs: number): boolean {
    return this.unpushed === 0 && !this.syncing && now - this.lastRequestAt > idleMs;
  }
}
