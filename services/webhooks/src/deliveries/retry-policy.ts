/** Longest wait a receiver's `Retry-After` can impose on one retry. */
export const MAX_RETRY_AFTER_MS = 24 * 3600_000;

/**
 * When a failed delivery is tried again: `delaysMs[i]` after the (i+1)-th failed scheduled
 * attempt, spread by ± `jitter` (a fraction), and never sooner than the receiver's `Retry-After`
 * (capped at a day). After the last delay is used up the delivery has failed.
 */
export class RetryPolicy {
  constructor(
    readonly delaysMs: readonly number[],
    readonly jitter = 0.1,
    private readonly random: () => number = Math.random,
  ) {}

  /** Scheduled attempts a delivery gets in all: the first plus one per delay. */
  get maxAttempts(): number {
    return this.delaysMs.length + 1;
  }

  /** The time of the next attempt after `failedAttempts` failed scheduled attempts, or null when none is left. */
  nextAttemptAt(failedAttempts: number, now: Date, retryAfterMs?: number): Date | null {
    const base = this.delaysMs[failedAttempts - 1];
    if (base === undefined) return null;
    let delay = base * (1 + this.jitter * (2 * this.random() - 1));
    if (retryAfterMs !== undefined) delay = Math.max(delay, Math.min(retryAfterMs, MAX_RETRY_AFTER_MS));
    return new Date(now.getTime() + Math.round(delay));
  }
}

/** `Retry-After` as milliseconds from `now`: delta-seconds or an HTTP date; undefined when absent or malformed. */
export function parseRetryAfter(value: string | undefined, now = Date.now()): number | undefined {
  if (!value) return undefined;
  const v = value.trim();
  if (/^\d+$/.test(v)) return Number(v) * 1000;
  const at = Date.parse(v);
  return Number.isNaN(at) ? undefined : Math.max(0, at - now);
}
