import { randomUUID } from 'node:crypto';
import { EntitySchema } from '@mikro-orm/postgresql';
import { DomainError, type SubscriptionStatus } from '@billing/contracts';
import { addDays, addDaysWithin, periodEnd, storable, type BillingSchedule } from '../plans/billing-interval.js';


export type SubscriptionEventType = 'subscription.created' | 'subscription.paused' | 'subscription.resumed' | 'subscription.cancelled' | 'subscription.past_due' | 'subscription.recovered';

/** What the merchant decided happens when a charge fails (contract §7, §10). */
export interface DunningPolicy {
  /** Days after the first failure at which the charge is retried, ascending ("1,3,7" → [1, 3, 7]). */
  retryOffsetsDays: number[];
  terminalAction: 'Cancel' | 'Pause';
}

/** How a failed charge left the subscription. */
export type FailureOutcome = 'past_due' | 'retry_scheduled' | 'terminated';

/** "1,3,7" → [1, 3, 7]; an empty or malformed entry is dropped. */
export function parseRetryOffsets(text: string): number[] {
  return text
    .split(',')
    .map((s) => Number(s.trim()))
    .filter((n) => Number.isInteger(n) && n > 0);
}

/** The plan terms a subscription is billed on. */
export interface PlanTerms extends BillingSchedule {
  trialDays: number;
}

/**
 * A member enrolled in a plan, billed in advance: the charge for a period is due at its start
 * (`nextBillingAt`). The aggregate guards its state machine and records the events its
 * transitions cause; the caller writes them to the outbox in the same transaction.
 *
 *   Active ──pause──▶ Paused ──resume──▶ Active
 *   Active ──failed charge──▶ PastDue ──charge succeeds──▶ Active   (billing run)
 *   PastDue ──pause──▶ Paused ──resume──▶ PastDue                    (the unpaid period is kept)
 *   Active | Paused | PastDue ──cancel──▶ Cancelled                  (final)
 *
 * A period whose charge failed is owed until it is collected or the terminal action writes it
 * off (`dunningPeriodStart` set): a pause holds its retries, it does not forgive it.
 */
const CHARGING_NOW = 'A billing run is charging this subscription right now; try again shortly.';

export function chargingNow(): DomainError {
  return new DomainError('invalid_transition', CHARGING_NOW, { retryAfterSeconds: 1 });
}

/**
 * The refusal of a resume while a charge of the subscription has no answer recorded and no
 * request is waiting for one: its provider call timed out, or the process making it died. The
 * next billing run repeats the call with the same idempotency key and records the answer.
 */
export function chargeOutcomeUnknown(): DomainError {
  return new DomainError(
    'invalid_transition',
    'A charge of this subscription has an unknown outcome (its payment provider call got no answer); the next billing run completes it. Resume the subscription after that: resumed now, it could start and be charged for a new period while the one that charge paid for is still running.',
    { retryAfterSeconds: 60 },
  );
}

/** Whether `e` is the refusal of a change while a charge of the subscription is in flight (`refuseWhileCharging`). */
export function isChargingNow(e: unknown): boolean {
  return e instanceof DomainError && e.code === 'invalid_transition' && e.message === CHARGING_NOW;
}

export class Subscription {
  id: string = randomUUID();
  merchantId!: string;
  memberId!: string;
  planId!: string;
  paymentMethodId: string | null = null;
  /** Charged on `paymentMethodId` only, never on the member's other methods (made by a hosted checkout). */
  ownMethodOnly = false;
  status: SubscriptionStatus = 'Active';
  currentPeriodStart!: Date;
  currentPeriodEnd!: Date;
  /** When the next charge is due; null once Cancelled. */
  nextBillingAt: Date | null = null;
  /** Day-of-month and time-of-day anchor of calendar periods (the first paid period's start). */
  billingAnchor!: Date;
  cancelAtPeriodEnd = false;
  pausedAt: Date | null = null;
  resumeAt: Date | null = null;
  cancelledAt: Date | null = null;
  /**
   * While PastDue, or Paused owing a period (paused while PastDue, or its bank debit failed at
   * settlement while paused): the start of the period being collected, and when its first
   * charge failed.
   */
  dunningPeriodStart: Date | null = null;
  dunningStartedAt: Date | null = null;
  /** Retries of the period being collected that have run (0 before the first retry); kept while a retry's bank debit settles. */
  retryCount = 0;
  /** Lease of the billing run charging it now; another run leaves it alone until it passes. */
  claimedUntil: Date | null = null;
  createdAt: Date = new Date();
  updatedAt: Date = new Date();

  /** Not persisted: events caused since load, drained by `pullEvents`. */
  private pending?: SubscriptionEventType[];

  /**
   * Starts at `startDate` (or now). Without a trial the first period is due at once; with one,
   * the trial is a free period and the first charge is due when it ends.
   */
  static start(
    input: { merchantId: string; memberId: string; planId: string; paymentMethodId: string | null; ownMethodOnly?: boolean; startDate?: Date | null; plan: PlanTerms },
    now = new Date(),
  ): Subscription {
    const s = new Subscription();
    const start = input.startDate ?? now;
    const { merchantId, memberId, planId, paymentMethodId } = input;
    Object.assign(s, { merchantId, memberId, planId, paymentMethodId, ownMethodOnly: input.ownMethodOnly ?? false, createdAt: now, updatedAt: now });
    if (input.plan.trialDays > 0) {
      const trialEnd = addDays(start, input.plan.trialDays);
      Object.assign(s, { currentPeriodStart: start, currentPeriodEnd: trialEnd, nextBillingAt: trialEnd, billingAnchor: trialEnd });
    } else {
      Object.assign(s, { currentPeriodStart: start, currentPeriodEnd: periodEnd(start, input.plan), nextBillingAt: start, billingAnchor: start });
    }
    // Instants are stored as years 0001 to 9999: a first period (or trial) must end by then.
    if (!storable(s.currentPeriodEnd)) throw DomainError.field('startDate', 'The first period would end after the year 9999.');
    s.record('subscription.created');
    return s;
  }

  isLive(): boolean {
    return this.status !== 'Cancelled';
  }

  /** Active or PastDue → Paused. Billing stops until resumed (`resumeAt` is when it should be). */
  pause(resumeAt: Date | null, now = new Date(), schedule?: BillingSchedule): void {
    this.refuseWhenCancelled('paused');
    if (this.status === 'Paused') throw new DomainError('invalid_transition', 'The subscription is already paused.');
    if (resumeAt && resumeAt <= now) throw DomainError.field('resumeAt', 'Must be in the future.');
    // Resumed then, it may start a period there (`resume`), which must end by the year 9999.
    if (resumeAt && schedule && !storable(periodEnd(resumeAt, schedule))) throw DomainError.field('resumeAt', 'A period starting then would end after the year 9999.');
    this.status = 'Paused';
    this.pausedAt = now;
    this.resumeAt = resumeAt;
    this.touch(now, 'subscription.paused');
  }

  /**
   * Paused → Active. If the paused time covered the next due date, a new period starts now and
   * is due at once (billing in advance); otherwise the paid period runs on unchanged.
   *
   * Paused owing a period (`owesPeriodWhilePaused`) → PastDue: collection goes on where the
   * pause held it, the next retry at its date from the first failure (now when that has passed),
   * with `subscription.past_due`. If the paused time covered the end of the owed period, a new
   * period starts now as above, due once the owed one is collected (`advancePeriod`).
   *
   * Set to cancel at its period end, and that period ended while it was paused
   * (`endsWhilePaused`): it is Cancelled instead (`subscription.cancelled`), never charged again.
   *
   * Refused while a charge of it has no answer recorded (`facts.chargeUnanswered`): while it is
   * in flight (`chargingNow`, its claim not expired), or its outcome is unknown because the call
   * timed out or the process making it died (`chargeOutcomeUnknown`, until the next billing run
   * records it). The period that charge pays for is decided by its answer.
   */
  resume(schedule: BillingSchedule, now = new Date(), facts: { chargeUnanswered?: boolean } = {}): void {
    this.refuseWhenCancelled('resumed');
    if (this.status !== 'Paused') throw new DomainError('invalid_transition', `Only a paused subscription can be resumed; this one is ${this.status}.`);
    // Paused while a charge was in flight, or after its process died or the provider timed out:
    // until its answer is recorded (`recordPaidWhilePaused`) the period it pays for looks unpaid,
    // so a resume now would start a new period, charged once more beside the one already paid.
    if (facts.chargeUnanswered) {
      this.refuseWhileCharging(now);
      throw chargeOutcomeUnknown();
    }
    if (this.endsWhilePaused(now)) {
      this.end(now);
      return;
    }
    this.pausedAt = null;
    this.resumeAt = null;
    const owed = this.owesPeriodWhilePaused() ? this.dunningPeriodStart : null;
    if (owed) {
      this.status = 'PastDue';
      if (periodEnd(owed, schedule, this.billingAnchor) <= now) this.startPeriodAt(now, schedule);
      if (!this.nextBillingAt || this.nextBillingAt < now) this.nextBillingAt = now;
      this.touch(now, 'subscription.resumed');
      this.record('subscription.past_due');
      return;
    }
    this.status = 'Active';
    if (!this.nextBillingAt || this.nextBillingAt < now) {
      this.startPeriodAt(now, schedule);
      this.nextBillingAt = now;
    }
    this.touch(now, 'subscription.resumed');
  }

  /**
   * Whether it is Paused, set to cancel at its period end (cancelled with `atPeriodEnd` while
   * Active, then paused), and that period has ended by `at`: a billing run or a resume then
   * cancels it (`endAtPeriodEnd`, `resume`). The period is its paid one (it ends at
   * `nextBillingAt`) or, paused before its first charge was made, its current one unpaid: the
   * period the cancellation was asked for has ended, so none after it is started and charged.
   * Not while it owes a period whose charge failed (PastDue, then paused): a resume collects that
   * first, as for a PastDue one.
   */
  endsWhilePaused(at: Date): boolean {
    if (this.status !== 'Paused' || !this.cancelAtPeriodEnd || this.dunningPeriodStart !== null || this.nextBillingAt === null) return false;
    const unpaid = this.nextBillingAt.getTime() === this.currentPeriodStart.getTime();
    return (unpaid ? this.currentPeriodEnd : this.nextBillingAt) <= at;
  }

  /**
   * Whether, set to cancel at its period end, that end has come by `at`, so a billing run ends it
   * (`endAtPeriodEnd`) rather than charging it or going on collecting: Active with its current
   * period paid (or its charge Processing, a bank debit settling) and due again; PastDue (its
   * period's charge failed, at once or at settlement) once that period has ended, so no retry is
   * made after the cancellation took effect (the arrears are the merchant's to collect with a
   * manual retry before then); or Paused (`endsWhilePaused`).
   */
  endsAtPeriodEnd(at: Date): boolean {
    if (!this.cancelAtPeriodEnd) return false;
    if (this.status === 'Active') return !this.owesCurrentPeriod() && this.nextBillingAt !== null && this.nextBillingAt <= at;
    if (this.status === 'PastDue') return this.currentPeriodEnd <= at;
    return this.endsWhilePaused(at);
  }

  /** Whether it is Paused with a period still owed: it resumes PastDue (`resume`). */
  owesPeriodWhilePaused(): boolean {
    return this.status === 'Paused' && this.dunningPeriodStart !== null;
  }

  /**
   * Cancels now, or with `atPeriodEnd` an Active subscription stays Active with
   * `cancelAtPeriodEnd` until its paid period ends (the billing run then cancels it instead of
   * charging). A Paused or PastDue subscription has no paid period running, so it is cancelled
   * at once either way.
   */
  cancel(atPeriodEnd: boolean, now = new Date()): void {
    this.refuseWhenCancelled('cancelled');
    this.refuseWhileCharging(now);
    if (atPeriodEnd && this.status === 'Active') {
      if (this.cancelAtPeriodEnd) return;
      this.cancelAtPeriodEnd = true;
      this.updatedAt = now;
      return;
    }
    // Cancelled now, not at a period end, whatever was asked before.
    this.cancelAtPeriodEnd = false;
    this.end(now);
  }

  /** The start of the period the next charge pays for: the one being collected while PastDue. */
  duePeriodStart(): Date | null {
    return this.status === 'PastDue' ? this.dunningPeriodStart : this.nextBillingAt;
  }

  /** 1 for a period's first charge, 2 for its first retry, ... */
  chargeAttempt(): number {
    return this.status === 'PastDue' ? this.retryCount + 2 : 1;
  }

  /**
   * Whether its current period is still to be paid: billed in advance, a period is paid by the
   * charge due at its start, so a new subscription (no trial) or one resumed into a new period
   * owes its current period until that charge succeeds (which moves `nextBillingAt` to its end).
   * Cancelled with `atPeriodEnd` meanwhile, it is still charged for it and ends at its end.
   */
  owesCurrentPeriod(): boolean {
    return this.status === 'Active' && this.nextBillingAt !== null && this.nextBillingAt.getTime() === this.currentPeriodStart.getTime();
  }

  /** Whether a billing run at `asOf` should charge it (or end it, with cancelAtPeriodEnd). */
  isDue(asOf: Date): boolean {
    return (this.status === 'Active' || this.status === 'PastDue') && this.nextBillingAt !== null && this.nextBillingAt <= asOf;
  }

  /**
   * Billing run: the charge for the period due (`duePeriodStart`) succeeded or is processing.
   * That period becomes current, dunning ends, and the next period is due at its end. A
   * processing charge (a bank debit) may still fail at settlement: when it was a retry, dunning
   * then goes on from where it was (`recordFailedSettlement`), so when it started is kept, and
   * for a retry (made PastDue) how many retries had run. A period collected after a resume that
   * started a newer one (`resume`) stays behind it: the newer one, started at the resume, is then due.
   * A PastDue one is Active again, with `subscription.recovered`.
   */
  advancePeriod(schedule: BillingSchedule, now = new Date(), charge: { processing?: boolean } = {}): void {
    if (this.status !== 'Active' && this.status !== 'PastDue') throw new DomainError('invalid_transition', `A ${this.status} subscription is not billed.`);
    const start = this.duePeriodStart();
    if (!start) throw new DomainError('invalid_transition', 'Nothing is due.');
    const retrying = this.status === 'PastDue';
    this.collected(start, schedule, now, { processing: charge.processing, retrying });
    this.status = 'Active';
    if (retrying) this.record('subscription.recovered');
  }

  /**
   * A charge for `periodStart` succeeded or is processing, but the subscription was paused while
   * the charge was in flight (a pause racing a billing run or a manual retry): the period it held
   * (`nextBillingAt`, or the one it owed, `dunningPeriodStart`) is paid all the same, as if the
   * pause had come just after the charge. It stays Paused; resumed before that period ends, the
   * paid period runs on, after it, a new one starts (`resume`), so the period is never charged
   * again. False (nothing changes) when it is not Paused or held another period.
   */
  recordPaidWhilePaused(periodStart: Date, schedule: BillingSchedule, now = new Date(), charge: { processing?: boolean } = {}): boolean {
    if (this.status !== 'Paused') return false;
    const owing = this.dunningPeriodStart !== null;
    const held = this.dunningPeriodStart ?? this.nextBillingAt;
    if (!held || held.getTime() !== periodStart.getTime()) return false;
    this.collected(periodStart, schedule, now, { processing: charge.processing, retrying: owing });
    return true;
  }

  /**
   * Billing run: every payment method declined the charge due at `at`. The first failure of a
   * period makes the subscription PastDue and schedules the retries at the policy's offsets after
   * it; a failed retry schedules the next; when none is left the terminal action applies
   * (Cancel → Cancelled, Pause → Paused).
   */
  recordFailedCharge(policy: DunningPolicy, at: Date): FailureOutcome {
    if (this.status !== 'Active' && this.status !== 'PastDue') throw new DomainError('invalid_transition', `A ${this.status} subscription is not billed.`);
    const offsets = policy.retryOffsetsDays;
    if (this.status === 'Active') {
      this.status = 'PastDue';
      this.dunningPeriodStart = this.nextBillingAt;
      this.dunningStartedAt = at;
      this.retryCount = 0;
      if (offsets.length > 0) {
        this.nextBillingAt = addDaysWithin(at, offsets[0]!);
        this.touch(at, 'subscription.past_due');
        return 'past_due';
      }
      this.record('subscription.past_due');
    } else {
      this.retryCount += 1;
      if (this.retryCount < offsets.length) {
        this.nextBillingAt = addDaysWithin(this.dunningStartedAt ?? at, offsets[this.retryCount]!);
        this.updatedAt = at;
        return 'retry_scheduled';
      }
    }
    // The terminal action writes the period off: resumed from the terminal pause, it starts afresh.
    this.endDunning();
    if (policy.terminalAction === 'Pause') {
      this.status = 'Paused';
      this.pausedAt = at;
      this.resumeAt = null;
      this.touch(at, 'subscription.paused');
    } else {
      this.end(at);
    }
    return 'terminated';
  }

  /**
   * A Processing bank charge of the period starting at `periodStart` (the current one, or the
   * one before it when a resume has started a new one since), its `attempt`, failed at
   * settlement: the period is collected again. A first charge's failure starts dunning at `at`,
   * as a declined charge does; a retry's failure is that retry failing, so dunning goes on where
   * it was: the retries already run count, the next is at its offset from when dunning started
   * (due at once when that has passed), and when none is left the terminal action applies.
   * Paused meanwhile, it stays Paused owing the period, its retries scheduled the same way, and
   * becomes PastDue when resumed (`resume`); its terminal action applies at once when no retry is
   * left: Cancel cancels it, Pause keeps it Paused with the period written off. Null (nothing
   * changes) when it is Cancelled.
   */
  recordFailedSettlement(periodStart: Date, attempt: number, policy: DunningPolicy, at: Date): FailureOutcome | null {
    if (this.status === 'Paused') return this.recordFailureWhilePaused(periodStart, attempt, policy, at);
    if (this.status !== 'Active') return null;
    this.nextBillingAt = periodStart;
    if (attempt > 1) {
      this.status = 'PastDue';
      this.dunningPeriodStart = periodStart;
      this.dunningStartedAt ??= at;
      // `retryCount` is the retries before this one, as `advancePeriod` kept it (not `attempt - 2`:
      // manual retries of the period take attempt numbers too); recordFailedCharge counts this one.
      // PastDue again after the retry made it Active (`subscription.recovered`): said as such.
      this.record('subscription.past_due');
    }
    return this.recordFailedCharge(policy, at);
  }

  /** See `recordFailedSettlement`: the same ladder as `recordFailedCharge`, nothing charged while Paused. */
  private recordFailureWhilePaused(periodStart: Date, attempt: number, policy: DunningPolicy, at: Date): FailureOutcome {
    const offsets = policy.retryOffsetsDays;
    const startedAt = attempt > 1 ? (this.dunningStartedAt ?? at) : at;
    // The retries run, this one included (`retryCount` as `advancePeriod` kept it, not
    // `attempt - 1`: manual retries of the period take attempt numbers too).
    const retries = attempt > 1 ? this.retryCount + 1 : 0;
    this.updatedAt = at;
    if (retries < offsets.length) {
      this.dunningPeriodStart = periodStart;
      this.dunningStartedAt = startedAt;
      this.retryCount = retries;
      this.nextBillingAt = addDaysWithin(startedAt, offsets[this.retryCount]!);
      return 'retry_scheduled';
    }
    this.endDunning();
    if (policy.terminalAction === 'Pause') {
      // Written off, as after a terminal pause: resumed, it starts a new period at once.
      this.nextBillingAt = periodStart;
    } else {
      this.end(at);
    }
    return 'terminated';
  }

  /**
   * Billing run at the end of the period of a subscription cancelled with `atPeriodEnd`
   * (`endsAtPeriodEnd`): it ends instead of being charged or collected.
   */
  endAtPeriodEnd(at: Date): void {
    if (!this.endsAtPeriodEnd(at)) throw new DomainError('invalid_transition', 'The subscription is not set to end at its period end.');
    this.end(at);
  }

  /** Events caused since the last call, oldest first. */
  pullEvents(): SubscriptionEventType[] {
    const events = this.pending ?? [];
    this.pending = [];
    return events;
  }

  /**
   * The period starting at `start` is paid: it becomes current and the next is due at its end (or,
   * collected behind a newer period a resume started, that newer one is due), and dunning ends. A
   * processing charge (a bank debit) may still fail at settlement: when it was a retry
   * (`retrying`), dunning then goes on from where it was, so when it started and how many retries
   * had run are kept.
   */
  private collected(start: Date, schedule: BillingSchedule, now: Date, charge: { processing?: boolean; retrying: boolean }): void {
    if (start < this.currentPeriodStart) {
      this.nextBillingAt = this.currentPeriodStart;
    } else {
      this.currentPeriodStart = start;
      this.currentPeriodEnd = periodEnd(start, schedule, this.billingAnchor);
      this.nextBillingAt = this.currentPeriodEnd;
    }
    this.dunningPeriodStart = null;
    if (!charge.processing) this.dunningStartedAt = null;
    if (!(charge.processing && charge.retrying)) this.retryCount = 0;
    this.updatedAt = now;
  }

  /** A new period starting at `now`, anchored there (its charge is due as the caller decides). */
  private startPeriodAt(now: Date, schedule: BillingSchedule): void {
    this.currentPeriodStart = now;
    this.currentPeriodEnd = periodEnd(now, schedule);
    this.billingAnchor = now;
  }

  /** → Cancelled at `at` (final): nothing more is billed, paused or resumed. */
  private end(at: Date): void {
    this.status = 'Cancelled';
    this.cancelledAt = at;
    this.nextBillingAt = null;
    this.pausedAt = null;
    this.resumeAt = null;
    this.touch(at, 'subscription.cancelled');
  }

  private endDunning(): void {
    this.dunningPeriodStart = null;
    this.dunningStartedAt = null;
    this.retryCount = 0;
  }

  /**
   * A billing run or a manual retry is charging it now (its claim has not expired): a cancel
   * decided now would be overtaken by the charge's answer (the next period charged after an
   * answered cancel, or a period end the answer then moves). `isChargingNow` tells the caller
   * to decide again once the answer is recorded.
   */
  private refuseWhileCharging(now: Date): void {
    if (this.claimedUntil && this.claimedUntil > now) throw chargingNow();
  }

  private refuseWhenCancelled(verb: string): void {
    if (this.status === 'Cancelled') throw new DomainError('invalid_transition', `A cancelled subscription cannot be ${verb}.`);
  }

  private touch(now: Date, event: SubscriptionEventType): void {
    this.updatedAt = now;
    this.record(event);
  }

  private record(event: SubscriptionEventType): void {
    (this.pending ??= []).push(event);
  }

  toMessage() {
    const iso = (d: Date | null) => d?.toISOString();
    return {
      id: this.id,
      merchantId: this.merchantId,
      memberId: this.memberId,
      planId: this.planId,
      paymentMethodId: this.paymentMethodId ?? undefined,
      status: this.status,
      currentPeriodStart: this.currentPeriodStart.toISOString(),
      currentPeriodEnd: this.currentPeriodEnd.toISOString(),
      nextBillingAt: iso(this.nextBillingAt),
      cancelAtPeriodEnd: this.cancelAtPeriodEnd,
      pausedAt: iso(this.pausedAt),
      resumeAt: iso(this.resumeAt),
      cancelledAt: iso(this.cancelledAt),
      createdAt: this.createdAt.toISOString(),
      updatedAt: this.updatedAt.toISOString(),
    };
  }

  /** The subscription as the REST API shows it (the payload of subscription events). */
  toView() {
    const m = this.toMessage();
    return { ...m, paymentMethodId: m.paymentMethodId ?? null, nextBillingAt: m.nextBillingAt ?? null, pausedAt: m.pausedAt ?? null, resumeAt: m.resumeAt ?? null, cancelledAt: m.cancelledAt ?? null };
  }
}

export const SubscriptionSchema = new EntitySchema<Subscription>({
  class: Subscription,
  tableName: 'subscriptions',
  properties: {
    id: { type: 'uuid', primary: true },
    merchantId: { type: 'uuid' },
    memberId: { type: 'uuid' },
    planId: { type: 'uuid' },
    paymentMethodId: { type: 'uuid', nullable: true },
    ownMethodOnly: { type: 'boolean', default: false },
    status: { type: 'string' },
    currentPeriodStart: { type: 'Date', columnType: 'timestamptz' },
    currentPeriodEnd: { type: 'Date', columnType: 'timestamptz' },
    nextBillingAt: { type: 'Date', columnType: 'timestamptz', nullable: true },
    billingAnchor: { type: 'Date', columnType: 'timestamptz' },
    cancelAtPeriodEnd: { type: 'boolean' },
    pausedAt: { type: 'Date', columnType: 'timestamptz', nullable: true },
    resumeAt: { type: 'Date', columnType: 'timestamptz', nullable: true },
    cancelledAt: { type: 'Date', columnType: 'timestamptz', nullable: true },
    dunningPeriodStart: { type: 'Date', columnType: 'timestamptz', nullable: true },
    dunningStartedAt: { type: 'Date', columnType: 'timestamptz', nullable: true },
    retryCount: { type: 'integer' },
    claimedUntil: { type: 'Date', columnType: 'timestamptz', nullable: true },
    createdAt: { type: 'Date', columnType: 'timestamptz' },
    updatedAt: { type: 'Date', columnType: 'timestamptz' },
  },
});
