import { describe, expect, it } from 'vitest';
import { DomainError } from '@billing/contracts';
import { Subscription, type PlanTerms } from './subscription.js';

const MONTHLY: PlanTerms = { interval: 'Month', intervalCount: 1, trialDays: 0 };
const POLICY = { retryOffsetsDays: [1, 3, 7], terminalAction: 'Cancel' as const };
const T0 = new Date('2026-01-31T10:00:00Z');
const later = (days: number) => new Date(T0.getTime() + days * 86_400_000);

function start(plan: PlanTerms = MONTHLY, startDate?: Date): Subscription {
  const s = Subscription.start({ merchantId: 'm', memberId: 'mem', planId: 'p', paymentMethodId: null, startDate, plan }, T0);
  s.pullEvents();
  return s;
}

function codeOf(fn: () => void): string | undefined {
  try {
    fn();
  } catch (e) {
    if (e instanceof DomainError) return e.code;
    throw e;
  }
  return undefined;
}

describe('Subscription.start', () => {
  it('bills in advance: the first period starts now and is due at once', () => {
    const s = Subscription.start({ merchantId: 'm', memberId: 'mem', planId: 'p', paymentMethodId: null, plan: MONTHLY }, T0);
    expect(s.status).toBe('Active');
    expect(s.currentPeriodStart).toEqual(T0);
    expect(s.currentPeriodEnd.toISOString()).toBe('2026-02-28T10:00:00.000Z');
    expect(s.nextBillingAt).toEqual(T0);
    expect(s.pullEvents()).toEqual(['subscription.created']);
    expect(s.pullEvents()).toEqual([]);
  });

  it('starts at startDate when given', () => {
    const s = start(MONTHLY, new Date('2026-03-01T00:00:00Z'));
    expect(s.currentPeriodStart.toISOString()).toBe('2026-03-01T00:00:00.000Z');
    expect(s.nextBillingAt?.toISOString()).toBe('2026-03-01T00:00:00.000Z');
  });

  it('makes a trial a free first period, with the first charge due at its end', () => {
    const s = start({ interval: 'Week', intervalCount: 1, trialDays: 14 });
    expect(s.currentPeriodEnd).toEqual(later(14));
    expect(s.nextBillingAt).toEqual(later(14));
  });
});

describe('Subscription transitions', () => {
  it('pauses an Active subscription and resumes it', () => {
    const s = start();
    s.pause(later(10), later(1));
    expect(s.status).toBe('Paused');
    expect(s.pausedAt).toEqual(later(1));
    expect(s.resumeAt).toEqual(later(10));
    s.resume(MONTHLY, later(2));
    expect(s.status).toBe('Active');
    expect(s.pausedAt).toBeNull();
    expect(s.resumeAt).toBeNull();
    expect(s.pullEvents()).toEqual(['subscription.paused', 'subscription.resumed']);
  });

  it('starts a new period on resume when the pause covered the due date', () => {
    const s = start();
    s.advancePeriod(MONTHLY, T0); // first period paid; next due 2026-02-28
    s.pause(null, later(1));
    s.resume(MONTHLY, later(60));
    expect(s.currentPeriodStart).toEqual(later(60));
    expect(s.nextBillingAt).toEqual(later(60));
  });

  it('keeps the paid period on resume when the due date has not passed', () => {
    const s = start();
    s.advancePeriod(MONTHLY, T0);
    const due = s.nextBillingAt;
    s.pause(null, later(1));
    s.resume(MONTHLY, later(5));
    expect(s.nextBillingAt).toEqual(due);
  });

  it('refuses to resume while a charge has no answer recorded: in flight (charging now), or its outcome unknown; then the paid period runs on', () => {
    const s = start();
    s.claimedUntil = new Date(T0.getTime() + 60_000); // a run is charging its first period
    s.pause(null, T0);
    s.pullEvents();
    const refusal = (at: Date) => {
      try {
        s.resume(MONTHLY, at, { chargeUnanswered: true });
      } catch (e) {
        return e instanceof DomainError ? [e.code, e.message.startsWith('A billing run is charging') ? 'charging now' : 'unknown outcome', e.extensions.retryAfterSeconds] : e;
      }
      return 'resumed';
    };
    expect(refusal(new Date(T0.getTime() + 1000))).toEqual(['invalid_transition', 'charging now', 1]);
    // Its process died or the provider timed out: unknown until a billing run records it.
    expect(refusal(later(1))).toEqual(['invalid_transition', 'unknown outcome', 60]);
    expect(s.status).toBe('Paused');
    expect(s.pullEvents()).toEqual([]);
    // Recorded paid (`recordPaidWhilePaused`), a resume within the period keeps it.
    expect(s.recordPaidWhilePaused(T0, MONTHLY, later(1))).toBe(true);
    s.resume(MONTHLY, later(2));
    expect(s).toMatchObject({ status: 'Active', currentPeriodStart: T0, nextBillingAt: s.currentPeriodEnd });
  });

  it('refuses to pause a Paused subscription and to resume an Active one', () => {
    const s = start();
    expect(codeOf(() => s.resume(MONTHLY))).toBe('invalid_transition');
    s.pause(null);
    expect(codeOf(() => s.pause(null))).toBe('invalid_transition');
  });

  it('refuses a resumeAt that is not in the future', () => {
    const s = start();
    expect(codeOf(() => s.pause(T0, later(1)))).toBe('validation_failed');
    expect(s.status).toBe('Active');
  });

  it('refuses everything on a Cancelled subscription', () => {
    const s = start();
    s.cancel(false, later(1));
    expect(s.status).toBe('Cancelled');
    expect(s.cancelledAt).toEqual(later(1));
    expect(s.nextBillingAt).toBeNull();
    expect(s.isLive()).toBe(false);
    expect(codeOf(() => s.pause(null))).toBe('invalid_transition');
    expect(codeOf(() => s.resume(MONTHLY))).toBe('invalid_transition');
    expect(codeOf(() => s.cancel(false))).toBe('invalid_transition');
    expect(codeOf(() => s.cancel(true))).toBe('invalid_transition');
    expect(codeOf(() => s.advancePeriod(MONTHLY))).toBe('invalid_transition');
    expect(s.pullEvents()).toEqual(['subscription.cancelled']);
  });

  it('cancels at period end by flagging an Active subscription, without an event', () => {
    const s = start();
    s.cancel(true, later(1));
    expect(s.status).toBe('Active');
    expect(s.cancelAtPeriodEnd).toBe(true);
    expect(s.isLive()).toBe(true);
    s.cancel(true, later(2));
    expect(s.pullEvents()).toEqual([]);
    // Then cancelled now: no longer at its period end.
    s.cancel(false, later(3));
    expect(s).toMatchObject({ status: 'Cancelled', cancelAtPeriodEnd: false, cancelledAt: later(3) });
  });

  it('cancels a Paused or PastDue subscription at once even when asked for period end', () => {
    const paused = start();
    paused.pause(null);
    paused.cancel(true);
    expect(paused.status).toBe('Cancelled');
    const pastDue = start();
    pastDue.recordFailedCharge(POLICY, T0);
    pastDue.cancel(true);
    expect(pastDue.status).toBe('Cancelled');
  });

  it('ends at its period end a subscription set to cancel then and paused since: by a resume after it, or a billing run', () => {
    const paidThenPaused = () => {
      const s = start();
      s.advancePeriod(MONTHLY, T0); // the first period paid; it ends 2026-02-28
      s.cancel(true, later(1));
      s.pause(null, later(2));
      s.pullEvents();
      return s;
    };
    const periodEnd = new Date('2026-02-28T10:00:00Z');
    const resumedAfter = paidThenPaused();
    expect(resumedAfter.endsWhilePaused(later(27))).toBe(false);
    expect(resumedAfter.endsWhilePaused(periodEnd)).toBe(true);
    resumedAfter.resume(MONTHLY, later(40));
    expect(resumedAfter).toMatchObject({ status: 'Cancelled', cancelledAt: later(40), nextBillingAt: null });
    expect(resumedAfter.pullEvents()).toEqual(['subscription.cancelled']);

    // Resumed before its period end: Active again, still ending at it.
    const resumedBefore = paidThenPaused();
    resumedBefore.resume(MONTHLY, later(10));
    expect(resumedBefore).toMatchObject({ status: 'Active', cancelAtPeriodEnd: true, nextBillingAt: periodEnd });

    const ended = paidThenPaused();
    expect(codeOf(() => ended.endAtPeriodEnd(later(27)))).toBe('invalid_transition');
    ended.endAtPeriodEnd(periodEnd);
    expect(ended).toMatchObject({ status: 'Cancelled', cancelledAt: periodEnd });

    // Its first period never charged (paused before a billing run came): that period is the one
    // the cancellation was asked for. Resumed after it ended, it is Cancelled, where it used to
    // start a new period and charge it; resumed before, a period starts at the resume and is due
    // then, as for any resume past a due date (charged, and ending at its end).
    const unpaid = () => {
      const s = start();
      s.cancel(true, T0);
      s.pause(null, T0);
      s.pullEvents();
      return s;
    };
    const unpaidAfter = unpaid();
    expect(unpaidAfter.endsWhilePaused(later(27))).toBe(false);
    expect(unpaidAfter.endsWhilePaused(periodEnd)).toBe(true);
    unpaidAfter.resume(MONTHLY, later(60));
    expect(unpaidAfter).toMatchObject({ status: 'Cancelled', cancelledAt: later(60), nextBillingAt: null });
    expect(unpaidAfter.pullEvents()).toEqual(['subscription.cancelled']);
    const unpaidEnded = unpaid();
    expect(unpaidEnded.endsAtPeriodEnd(periodEnd)).toBe(true);
    unpaidEnded.endAtPeriodEnd(periodEnd);
    expect(unpaidEnded).toMatchObject({ status: 'Cancelled', cancelledAt: periodEnd });
    const unpaidBefore = unpaid();
    unpaidBefore.resume(MONTHLY, later(10));
    expect(unpaidBefore).toMatchObject({ status: 'Active', cancelAtPeriodEnd: true, currentPeriodStart: later(10), nextBillingAt: later(10) });
  });

  it('ends at its period end a subscription set to cancel then whose period\'s charge failed at settlement: no retry after it', () => {
    const s = start();
    s.advancePeriod(MONTHLY, T0); // a bank debit, Processing: the period is current
    s.cancel(true, later(1));
    s.recordFailedSettlement(T0, 1, { retryOffsetsDays: [40], terminalAction: 'Cancel' }, later(3));
    expect(s).toMatchObject({ status: 'PastDue', cancelAtPeriodEnd: true });
    expect(s.endsAtPeriodEnd(later(27))).toBe(false);
    expect(s.endsAtPeriodEnd(new Date('2026-02-28T10:00:00Z'))).toBe(true);
    s.endAtPeriodEnd(later(29));
    expect(s).toMatchObject({ status: 'Cancelled', cancelledAt: later(29), nextBillingAt: null });
  });

  it('pauses a PastDue subscription; a later successful charge makes it Active', () => {
    const s = start();
    s.recordFailedCharge(POLICY, T0);
    expect(s.status).toBe('PastDue');
    expect(codeOf(() => s.resume(MONTHLY))).toBe('invalid_transition');
    s.pullEvents();
    s.advancePeriod(MONTHLY);
    expect(s.status).toBe('Active');
    // A receiver following the subscription by its events learns it is Active again.
    expect(s.pullEvents()).toEqual(['subscription.recovered']);
    s.recordFailedCharge(POLICY, T0);
    s.pause(null);
    expect(s.status).toBe('Paused');
  });

  it('records a charge that succeeded after a pause as paying the period it held, staying Paused', () => {
    // Paused while its first charge was in flight: the first period is paid.
    const s = start();
    s.pause(null, T0);
    expect(s.recordPaidWhilePaused(later(1), MONTHLY, T0)).toBe(false); // another period: nothing changes
    expect(s.recordPaidWhilePaused(T0, MONTHLY, T0)).toBe(true);
    expect(s.status).toBe('Paused');
    expect(s.currentPeriodStart).toEqual(T0);
    expect(s.nextBillingAt?.toISOString()).toBe('2026-02-28T10:00:00.000Z');
    // Resumed within the paid period, the period runs on: nothing is due before its end.
    s.resume(MONTHLY, later(3));
    expect(s.status).toBe('Active');
    expect(s.isDue(later(3))).toBe(false);
    expect(s.pullEvents()).toEqual(['subscription.paused', 'subscription.resumed']);

    // Paused while PastDue with a retry in flight: the owed period is paid, dunning is over.
    const d = start();
    d.recordFailedCharge(POLICY, T0);
    d.pause(null, later(1));
    expect(d.owesPeriodWhilePaused()).toBe(true);
    expect(d.recordPaidWhilePaused(T0, MONTHLY, later(1))).toBe(true);
    expect(d.owesPeriodWhilePaused()).toBe(false);
    expect([d.status, d.retryCount, d.nextBillingAt?.toISOString()]).toEqual(['Paused', 0, '2026-02-28T10:00:00.000Z']);
    d.resume(MONTHLY, later(2));
    expect(d.status).toBe('Active');

    // Not Paused: not this method's case.
    expect(start().recordPaidWhilePaused(T0, MONTHLY, T0)).toBe(false);
  });

  it('schedules no retry past the year 9999 (its last instant instead), and refuses a resumeAt whose period would end after it', () => {
    const s = Subscription.start({ merchantId: 'm', memberId: 'mem', planId: 'p', paymentMethodId: null, startDate: new Date('9999-11-25T00:00:00Z'), plan: MONTHLY }, T0);
    s.recordFailedCharge(POLICY, new Date('9999-12-31T00:00:00Z'));
    expect(s.nextBillingAt?.toISOString()).toBe('9999-12-31T23:59:59.999Z');
    const a = start();
    expect(codeOf(() => a.pause(new Date('9999-12-31T23:59:59Z'), T0, MONTHLY))).toBe('validation_failed');
    a.pause(new Date('9999-11-30T00:00:00Z'), T0, MONTHLY);
    expect(a.status).toBe('Paused');
  });

  it('advances calendar periods from the anchor without drift', () => {
    const s = start();
    s.advancePeriod(MONTHLY);
    expect(s.currentPeriodEnd.toISOString()).toBe('2026-02-28T10:00:00.000Z');
    s.advancePeriod(MONTHLY);
    expect(s.currentPeriodStart.toISOString()).toBe('2026-02-28T10:00:00.000Z');
    expect(s.currentPeriodEnd.toISOString()).toBe('2026-03-31T10:00:00.000Z');
    expect(s.nextBillingAt?.toISOString()).toBe('2026-03-31T10:00:00.000Z');
  });

  describe('dunning', () => {
    it('walks the retry ladder at the offsets after the first failure, then cancels', () => {
      const s = start();
      s.pullEvents();
      expect(s.recordFailedCharge(POLICY, T0)).toBe('past_due');
      expect([s.status, s.nextBillingAt?.toISOString(), s.chargeAttempt()]).toEqual(['PastDue', later(1).toISOString(), 2]);
      expect(s.duePeriodStart()?.toISOString()).toBe(T0.toISOString());
      expect(s.recordFailedCharge(POLICY, later(1))).toBe('retry_scheduled');
      expect(s.nextBillingAt?.toISOString()).toBe(later(3).toISOString());
      expect(s.recordFailedCharge(POLICY, later(3))).toBe('retry_scheduled');
      expect(s.nextBillingAt?.toISOString()).toBe(later(7).toISOString());
      expect(s.chargeAttempt()).toBe(4);
      expect(s.recordFailedCharge(POLICY, later(7))).toBe('terminated');
      expect([s.status, s.nextBillingAt]).toEqual(['Cancelled', null]);
      expect(s.pullEvents()).toEqual(['subscription.past_due', 'subscription.cancelled']);
    });

    it('pauses instead when the terminal action is Pause, and with no offsets at the first failure', () => {
      const s = start();
      s.pullEvents();
      expect(s.recordFailedCharge({ retryOffsetsDays: [], terminalAction: 'Pause' }, T0)).toBe('terminated');
      expect(s.status).toBe('Paused');
      expect(s.pullEvents()).toEqual(['subscription.past_due', 'subscription.paused']);
    });

    it('a successful retry collects the period that failed, keeping the anchor', () => {
      const s = start();
      s.recordFailedCharge(POLICY, T0);
      s.recordFailedCharge(POLICY, later(1));
      s.advancePeriod(MONTHLY, later(3));
      expect([s.status, s.currentPeriodStart.toISOString(), s.nextBillingAt?.toISOString(), s.retryCount]).toEqual(['Active', T0.toISOString(), '2026-02-28T10:00:00.000Z', 0]);
    });

    it('a first bank debit failing at settlement starts dunning then; a processing retry failing goes on with the ladder', () => {
      const s = start();
      s.advancePeriod(MONTHLY, T0, { processing: true }); // attempt 1, a bank debit, Processing
      expect(s.recordFailedSettlement(T0, 1, POLICY, later(3))).toBe('past_due');
      expect([s.status, s.nextBillingAt?.toISOString(), s.chargeAttempt()]).toEqual(['PastDue', later(4).toISOString(), 2]);
      s.pullEvents();
      s.advancePeriod(MONTHLY, later(4), { processing: true }); // attempt 2 (retry 1), Processing
      expect([s.status, s.nextBillingAt?.toISOString()]).toEqual(['Active', '2026-02-28T10:00:00.000Z']);
      expect(s.pullEvents()).toEqual(['subscription.recovered']);
      // Retry 1 fails at settlement three days later: retry 2 is at 3 + 3 days, retry 3 at 3 + 7.
      expect(s.recordFailedSettlement(T0, 2, POLICY, later(7))).toBe('retry_scheduled');
      // PastDue again, said as it was when it became Active.
      expect(s.pullEvents()).toEqual(['subscription.past_due']);
      expect([s.status, s.duePeriodStart()?.toISOString(), s.nextBillingAt?.toISOString(), s.chargeAttempt()]).toEqual(['PastDue', T0.toISOString(), later(6).toISOString(), 3]);
      s.advancePeriod(MONTHLY, later(7), { processing: true }); // attempt 3
      expect(s.recordFailedSettlement(T0, 3, POLICY, later(10))).toBe('retry_scheduled');
      expect([s.nextBillingAt?.toISOString(), s.chargeAttempt()]).toEqual([later(10).toISOString(), 4]);
      s.advancePeriod(MONTHLY, later(10), { processing: true }); // attempt 4, the last retry
      expect(s.recordFailedSettlement(T0, 4, POLICY, later(13))).toBe('terminated');
      expect(s.status).toBe('Cancelled');
    });

    it('a processing retry failing at settlement counts the retries run, whatever its attempt number (manual retries take numbers too)', () => {
      const s = start();
      s.recordFailedCharge(POLICY, T0); // attempt 1 declined: PastDue, no retry run yet
      s.advancePeriod(MONTHLY, later(1), { processing: true }); // attempt 5, after three manual retries
      expect(s.recordFailedSettlement(T0, 5, POLICY, later(4))).toBe('retry_scheduled');
      expect([s.status, s.nextBillingAt?.toISOString(), s.chargeAttempt()]).toEqual(['PastDue', later(3).toISOString(), 3]); // retry 2, at 0 + 3 days
    });

    it('paused meanwhile, a processing retry failing at settlement also counts the retries run, not its attempt number', () => {
      const s = start();
      s.recordFailedCharge(POLICY, T0); // attempt 1 declined: PastDue, no retry run yet
      s.advancePeriod(MONTHLY, later(1), { processing: true }); // attempt 5, after three manual retries
      s.pause(null, later(2));
      expect(s.recordFailedSettlement(T0, 5, POLICY, later(4))).toBe('retry_scheduled');
      expect([s.status, s.owesPeriodWhilePaused(), s.nextBillingAt?.toISOString()]).toEqual(['Paused', true, later(3).toISOString()]); // retry 2, at 0 + 3 days
      s.resume(MONTHLY, later(5));
      expect([s.status, s.chargeAttempt()]).toEqual(['PastDue', 3]);
    });

    it('a settled charge ends dunning for good: a later first debit failing at settlement starts it afresh', () => {
      const s = start();
      s.recordFailedCharge(POLICY, T0);
      s.advancePeriod(MONTHLY, later(1)); // the retry settled at once
      s.advancePeriod(MONTHLY, later(28), { processing: true }); // the next period, attempt 1
      expect(s.recordFailedSettlement(s.currentPeriodStart, 1, POLICY, later(31))).toBe('past_due');
      expect([s.nextBillingAt?.toISOString(), s.chargeAttempt()]).toEqual([later(32).toISOString(), 2]);
    });

    it('a bank debit failing at settlement while Paused keeps the period owed: resumed, it is PastDue and retried', () => {
      const s = start();
      s.advancePeriod(MONTHLY, T0, { processing: true });
      s.pause(null, later(1));
      s.pullEvents();
      expect(s.recordFailedSettlement(T0, 1, POLICY, later(3))).toBe('retry_scheduled');
      expect([s.status, s.owesPeriodWhilePaused(), s.nextBillingAt?.toISOString(), s.isDue(later(30))]).toEqual(['Paused', true, later(4).toISOString(), false]);
      expect(s.pullEvents()).toEqual([]);
      s.resume(MONTHLY, later(2));
      expect([s.status, s.duePeriodStart()?.toISOString(), s.nextBillingAt?.toISOString(), s.chargeAttempt()]).toEqual(['PastDue', T0.toISOString(), later(4).toISOString(), 2]);
      expect(s.pullEvents()).toEqual(['subscription.resumed', 'subscription.past_due']);
      s.advancePeriod(MONTHLY, later(4));
      expect([s.status, s.currentPeriodStart.toISOString(), s.nextBillingAt?.toISOString()]).toEqual(['Active', T0.toISOString(), '2026-02-28T10:00:00.000Z']);
    });

    it('resumed after its retry date, the owed period is retried at once; after its end, the period started at the resume is due once it is collected', () => {
      const s = start();
      s.advancePeriod(MONTHLY, T0, { processing: true });
      s.pause(null, later(1));
      s.recordFailedSettlement(T0, 1, POLICY, later(3));
      s.resume(MONTHLY, later(20));
      expect([s.status, s.currentPeriodStart.toISOString(), s.nextBillingAt?.toISOString()]).toEqual(['PastDue', T0.toISOString(), later(20).toISOString()]);

      const covered = start();
      covered.advancePeriod(MONTHLY, T0, { processing: true });
      covered.pause(null, later(1));
      covered.recordFailedSettlement(T0, 1, POLICY, later(3));
      covered.resume(MONTHLY, later(40));
      expect([covered.status, covered.duePeriodStart()?.toISOString(), covered.currentPeriodStart.toISOString(), covered.nextBillingAt?.toISOString()]).toEqual([
        'PastDue', T0.toISOString(), later(40).toISOString(), later(40).toISOString(),
      ]);
      covered.advancePeriod(MONTHLY, later(40), { processing: true }); // the owed period's retry, a bank debit
      expect([covered.status, covered.owesCurrentPeriod(), covered.nextBillingAt?.toISOString()]).toEqual(['Active', true, later(40).toISOString()]);
      // That retry fails at settlement too: the owed period is collected again, the new one waits.
      expect(covered.recordFailedSettlement(T0, 2, POLICY, later(43))).toBe('retry_scheduled');
      expect([covered.status, covered.duePeriodStart()?.toISOString(), covered.nextBillingAt?.toISOString(), covered.chargeAttempt()]).toEqual(['PastDue', T0.toISOString(), later(6).toISOString(), 3]);
      covered.advancePeriod(MONTHLY, later(43));
      expect([covered.status, covered.currentPeriodStart.toISOString(), covered.nextBillingAt?.toISOString()]).toEqual(['Active', later(40).toISOString(), later(40).toISOString()]);
      covered.advancePeriod(MONTHLY, later(43));
      expect([covered.currentPeriodStart.toISOString(), covered.currentPeriodEnd.toISOString()]).toEqual([later(40).toISOString(), covered.nextBillingAt?.toISOString()]);
    });

    it('a bank debit failing at settlement after a resume started a new period collects the old one first', () => {
      const s = start();
      s.advancePeriod(MONTHLY, T0, { processing: true });
      s.pause(null, later(1));
      s.resume(MONTHLY, later(40)); // a new period, due at once, waits for the debit to settle
      expect(s.recordFailedSettlement(T0, 1, POLICY, later(41))).toBe('past_due');
      expect([s.status, s.duePeriodStart()?.toISOString(), s.nextBillingAt?.toISOString()]).toEqual(['PastDue', T0.toISOString(), later(42).toISOString()]);
      s.advancePeriod(MONTHLY, later(42));
      expect([s.status, s.currentPeriodStart.toISOString(), s.nextBillingAt?.toISOString()]).toEqual(['Active', later(40).toISOString(), later(40).toISOString()]);
    });

    it('when no retry is left for a debit failing while Paused, the terminal action applies: Cancel cancels, Pause writes the period off', () => {
      const cancelled = start();
      cancelled.advancePeriod(MONTHLY, T0, { processing: true });
      cancelled.pause(null, later(1));
      cancelled.pullEvents();
      expect(cancelled.recordFailedSettlement(T0, 1, { retryOffsetsDays: [], terminalAction: 'Cancel' }, later(3))).toBe('terminated');
      expect([cancelled.status, cancelled.nextBillingAt, cancelled.pausedAt]).toEqual(['Cancelled', null, null]);
      expect(cancelled.pullEvents()).toEqual(['subscription.cancelled']);

      const paused = start();
      paused.advancePeriod(MONTHLY, T0, { processing: true });
      paused.pause(null, later(1));
      paused.pullEvents();
      expect(paused.recordFailedSettlement(T0, 2, { retryOffsetsDays: [1], terminalAction: 'Pause' }, later(3))).toBe('terminated');
      expect([paused.status, paused.owesPeriodWhilePaused()]).toEqual(['Paused', false]);
      paused.resume(MONTHLY, later(5));
      expect([paused.status, paused.currentPeriodStart.toISOString(), paused.nextBillingAt?.toISOString()]).toEqual(['Active', later(5).toISOString(), later(5).toISOString()]);
    });

    it('a PastDue subscription paused and resumed is PastDue again; one paused by the terminal action resumes into a new period', () => {
      const s = start();
      s.recordFailedCharge(POLICY, T0);
      s.pause(null, later(2));
      s.pullEvents();
      s.resume(MONTHLY, later(5));
      expect([s.status, s.duePeriodStart()?.toISOString(), s.nextBillingAt?.toISOString(), s.chargeAttempt()]).toEqual(['PastDue', T0.toISOString(), later(5).toISOString(), 2]);
      expect(s.pullEvents()).toEqual(['subscription.resumed', 'subscription.past_due']);

      const terminal = start();
      terminal.recordFailedCharge({ retryOffsetsDays: [], terminalAction: 'Pause' }, T0);
      terminal.resume(MONTHLY, later(5));
      expect([terminal.status, terminal.currentPeriodStart.toISOString(), terminal.nextBillingAt?.toISOString()]).toEqual(['Active', later(5).toISOString(), later(5).toISOString()]);
    });

    it('ends a subscription flagged cancelAtPeriodEnd instead of charging it', () => {
      const s = start();
      s.cancel(true, T0);
      expect(s.isDue(T0)).toBe(true);
      // Its first period unpaid: charged for it first, not ended.
      expect(codeOf(() => s.endAtPeriodEnd(T0))).toBe('invalid_transition');
      s.advancePeriod(MONTHLY, T0);
      expect(s.endsAtPeriodEnd(later(27))).toBe(false);
      s.endAtPeriodEnd(later(31));
      expect(s.status).toBe('Cancelled');
      expect(s.pullEvents()).toContain('subscription.cancelled');
    });
  });
});
