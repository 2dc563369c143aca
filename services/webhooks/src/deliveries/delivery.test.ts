import { describe, expect, it } from 'vitest';
import { transitionAfter, type AttemptOutcome } from './delivery.js';
import { parseRetryAfter, RetryPolicy } from './retry-policy.js';

const now = new Date('2026-01-01T00:00:00Z');
const policy = new RetryPolicy([5_000, 300_000, 1_800_000], 0, () => 0.5);
const ok: AttemptOutcome = { ok: true, statusCode: 200, durationMs: 3, error: null, responseBody: '' };
const failed: AttemptOutcome = { ok: false, statusCode: 500, durationMs: 3, error: null, responseBody: 'oops' };

describe('transitionAfter', () => {
  it('succeeds a delivery on a 2xx', () => {
    expect(transitionAfter('Scheduled', 0, ok, policy, now)).toEqual({ status: 'Succeeded', scheduledAttempts: 1, nextAttemptAt: null });
  });
  it('schedules the retries in order, then fails', () => {
    expect(transitionAfter('Scheduled', 0, failed, policy, now).nextAttemptAt).toEqual(new Date(now.getTime() + 5_000));
    expect(transitionAfter('Scheduled', 1, failed, policy, now).nextAttemptAt).toEqual(new Date(now.getTime() + 300_000));
    expect(transitionAfter('Scheduled', 2, failed, policy, now)).toMatchObject({ status: 'Pending', scheduledAttempts: 3 });
    expect(transitionAfter('Scheduled', 3, failed, policy, now)).toEqual({ status: 'Failed', scheduledAttempts: 4, nextAttemptAt: null });
  });
  it('waits at least as long as Retry-After asks', () => {
    const t = transitionAfter('Scheduled', 0, { ...failed, statusCode: 429, retryAfterMs: 60_000 }, policy, now);
    expect(t.nextAttemptAt).toEqual(new Date(now.getTime() + 60_000));
    const shorter = transitionAfter('Scheduled', 1, { ...failed, statusCode: 503, retryAfterMs: 1_000 }, policy, now);
    expect(shorter.nextAttemptAt).toEqual(new Date(now.getTime() + 300_000));
  });
  it('leaves the schedule alone on a manual attempt, and succeeds the delivery when it works', () => {
    expect(transitionAfter('Manual', 2, failed, policy, now)).toEqual({});
    expect(transitionAfter('Manual', 7, ok, policy, now)).toEqual({ status: 'Succeeded', nextAttemptAt: null });
  });
});

describe('RetryPolicy', () => {
  it('spreads delays by the jitter fraction', () => {
    const low = new RetryPolicy([10_000], 0.1, () => 0);
    const high = new RetryPolicy([10_000], 0.1, () => 0.999999);
    expect(low.nextAttemptAt(1, now)!.getTime() - now.getTime()).toBe(9_000);
    expect(high.nextAttemptAt(1, now)!.getTime() - now.getTime()).toBe(11_000);
  });
});

describe('parseRetryAfter', () => {
  it('reads seconds and HTTP dates', () => {
    expect(parseRetryAfter('120')).toBe(120_000);
    expect(parseRetryAfter(new Date(now.getTime() + 30_000).toUTCString(), now.getTime())).toBe(30_000);
    expect(parseRetryAfter('soon')).toBeUndefined();
    expect(parseRetryAfter(undefined)).toBeUndefined();
  });
});
