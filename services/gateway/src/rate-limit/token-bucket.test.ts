import { describe, expect, it } from 'vitest';
import { addConsumption, LocalBucket, refill, secondsUntilToken, type RatePolicy } from './token-bucket.js';

const policy: RatePolicy = { ratePerSecond: 5, burst: 10 };
const T0 = 1_700_000_000_000;

function takeMany(bucket: LocalBucket, n: number, now: number): number {
  let allowed = 0;
  for (let i = 0; i < n; i++) if (bucket.tryTake(now).allowed) allowed++;
  return allowed;
}

describe('refill', () => {
  it('adds ratePerSecond tokens per second, never above burst', () => {
    expect(refill({ level: 0, at: T0 }, policy, T0 + 1000)).toEqual({ level: 5, at: T0 + 1000 });
    expect(refill({ level: 8, at: T0 }, policy, T0 + 1000).level).toBe(10);
    expect(refill({ level: -10, at: T0 }, policy, T0 + 3000).level).toBe(5);
  });

  it('adds nothing when the clock runs backwards', () => {
    expect(refill({ level: 3, at: T0 }, policy, T0 - 5000)).toEqual({ level: 3, at: T0 });
  });
});

describe('secondsUntilToken', () => {
  it('is whole seconds, at least 1', () => {
    expect(secondsUntilToken(0.9, policy)).toBe(1);
    expect(secondsUntilToken(0, policy)).toBe(1);
    expect(secondsUntilToken(-4, policy)).toBe(1);
    expect(secondsUntilToken(-4.5, policy)).toBe(2);
    expect(secondsUntilToken(-10, policy)).toBe(3);
  });
});

describe('addConsumption', () => {
  it('treats a missing shared bucket as full', () => {
    expect(addConsumption(undefined, 3, policy, T0)).toEqual({ level: 7, at: T0 });
  });

  it('refills the shared bucket to now, then subtracts what was consumed', () => {
    expect(addConsumption({ level: 2, at: T0 }, 4, policy, T0 + 400)).toEqual({ level: 0, at: T0 + 400 });
  });

  it('records overshoot as debt, floored at -burst', () => {
    expect(addConsumption({ level: 1, at: T0 }, 6, policy, T0).level).toBe(-5);
    expect(addConsumption({ level: 1, at: T0 }, 60, policy, T0).level).toBe(-10);
  });
});

describe('LocalBucket', () => {
  it('admits a burst, then one request per 1/rate seconds', () => {
    const b = new LocalBucket(policy, T0);
    expect(takeMany(b, 15, T0)).toBe(10);
    const refused = b.tryTake(T0);
    expect(refused).toEqual({ allowed: false, retryAfterSeconds: 1 });
    expect(takeMany(b, 5, T0 + 200)).toBe(1);
    expect(takeMany(b, 5, T0 + 1200)).toBe(5);
  });

  it('counts admitted requests as unpushed, and refused ones not at all', () => {
    const b = new LocalBucket(policy, T0);
    takeMany(b, 12, T0);
    expect(b.unpushed).toBe(10);
  });

  it('adopts the shared level and keeps tokens admitted during the sync as unpushed', () => {
    const b = new LocalBucket(policy, T0);
    takeMany(b, 4, T0);
    const pushed = b.unpushed;
    takeMany(b, 2, T0 + 10); // admitted while the push was in flight
    // Another replica admitted 5 too: the shared bucket is 10 - 4 - 5 = 1 at T0.
    b.adopt({ level: 1, at: T0 }, pushed, T0 + 10);
    expect(b.unpushed).toBe(2);
    expect(b.state.level).toBeCloseTo(1 + 0.05 - 2, 6);
    expect(b.tryTake(T0 + 10).allowed).toBe(false);
  });

  it('makes two replicas together admit about one burst plus the refill, not two bursts', () => {
    const a = new LocalBucket(policy, T0);
    const b = new LocalBucket(policy, T0);
    let shared: { level: number; at: number } | undefined;
    const sync = (bucket: LocalBucket, now: number) => {
      const pushed = bucket.unpushed;
      shared = addConsumption(shared, pushed, policy, now);
      bucket.adopt(shared, pushed, now);
    };
    let admitted = 0;
    // 3 seconds, a request to each replica every 10 ms, syncs every 100 ms.
    for (let t = 0; t < 3000; t += 10) {
      admitted += takeMany(a, 1, T0 + t) + takeMany(b, 1, T0 + t);
      if (t % 100 === 0) {
        sync(a, T0 + t);
        sync(b, T0 + t);
      }
    }
    const oneReplicaAllowance = policy.burst + 3 * policy.ratePerSecond; // 25
    expect(admitted).toBeGreaterThanOrEqual(oneReplicaAllowance - 1);
    expect(admitted).toBeLessThanOrEqual(oneReplicaAllowance + 2);
  });

  it('keeps limiting on its own when syncs fail, with at most one burst of debt to push later', () => {
    const b = new LocalBucket(policy, T0);
    for (let t = 0; t < 10_000; t += 10) takeMany(b, 1, T0 + t);
    expect(b.unpushed).toBeGreaterThan(policy.burst);
    b.keepLocal();
    expect(b.unpushed).toBe(policy.burst);
    expect(takeMany(b, 10, T0 + 10_000)).toBeLessThanOrEqual(1);
  });

  it('is idle once nothing is unpushed and no request came for idleMs', () => {
    const b = new LocalBucket(policy, T0);
    b.tryTake(T0);
    expect(b.isIdle(T0 + 120_000, 60_000)).toBe(false);
    b.adopt({ level: 9, at: T0 }, 1, T0);
    expect(b.isIdle(T0 + 30_000, 60_000)).toBe(false);
    expect(b.isIdle(T0 + 120_000, 60_000)).toBe(true);
  });

  it('restore fills the bucket at once and pushes the tokens given back as negative consumption', () => {
    const b = new LocalBucket(policy, T0);
    for (let i = 0; i < 8; i++) b.charge(T0);
    b.adopt({ level: 2, at: T0 }, 8, T0);
    expect(b.unpushed).toBe(0);
    b.restore(T0);
    expect(b.peek(T0).allowed).toBe(true);
    expect(b.unpushed).toBe(-8);
    const shared = addConsumption({ level: 2, at: T0 }, b.unpushed, policy, T0);
    expect(shared.level).toBe(policy.burst);
    b.adopt(shared, -8, T0);
    expect(b.unpushed).toBe(0);
    expect(b.remaining(T0).remaining).toBe(policy.burst);
    // Never above a full bucket, whatever is given back.
    expect(addConsumption({ level: 9, at: T0 }, -50, policy, T0).level).toBe(policy.burst);
  });

  it('peek decides without taking; charge counts an event even past empty (failed authentications)', () => {
    const b = new LocalBucket(policy, T0);
    for (let i = 0; i < 10; i++) {
      expect(b.peek(T0).allowed).toBe(true);
      b.charge(T0);
    }
    expect(b.peek(T0)).toEqual({ allowed: false, retryAfterSeconds: 1 });
    b.charge(T0);
    expect(b.unpushed).toBe(11);
    expect(b.peek(T0 + 200).allowed).toBe(false);
    expect(b.peek(T0 + 400).allowed).toBe(true);
  });

  it('reports whole requests left and whole seconds until full (the RateLimit header)', () => {
    const b = new LocalBucket(policy, T0);
    expect(b.remaining(T0)).toEqual({ remaining: 10, resetSeconds: 0 });
    takeMany(b, 10, T0);
    expect(b.remaining(T0)).toEqual({ remaining: 0, resetSeconds: 2 });
    expect(b.remaining(T0 + 1100)).toEqual({ remaining: 5, resetSeconds: 1 });
  });
});
