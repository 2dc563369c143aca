import { type EntityManager, type MikroORM } from '@mikro-orm/postgresql';
import { DomainError, PROVIDER_ENVIRONMENTS } from '@billing/contracts';
import { toMajorUnits } from '@billing/money';
import { insertOutboxSql, instantOfRow, pooledQuery, queryRows, recordEvent, toOutboxJsonRow, transactPrepared, type Logger, type OutboxJsonRow, type SqlContext } from '@billing/service-runtime';
import { injectTraceHeaders, withoutCallSpans } from '@billing/telemetry';
import { platformFee } from '../fees/platform-fee.js';
import { Merchant } from '../merchants/merchant.js';
import { NO_PAYMENT_METHOD, PROVIDER_NOT_CONFIGURED, PROVIDER_REJECTED, ProviderRejected, type ChargeStatus, type PaymentProvider } from '../payment-provider/payment-provider.js';
import type { PaymentProviders } from '../payment-provider/payment-providers.js';
import { Plan } from '../plans/plan.js';
import { periodEnd, storable, type BillingSchedule } from '../plans/billing-interval.js';
import { recordSubscriptionEvents } from '../subscriptions/subscriptions-grpc.js';
import { parseRetryOffsets, Subscription, type DunningPolicy } from '../subscriptions/subscription.js';
import { subscriptionOfRow, subscriptionsWithPlansSql, type SubscriptionRow } from '../subscriptions/subscription-row.js';
import type { SubscriptionStore, TransitionFacts } from '../subscriptions/subscription-store.js';
import { Transaction, transactionEventData } from '../transactions/transaction.js';
import {
  chargeOrder,
  insertEvents,
  insertTransactions,
  loadPaymentMethods,
  loadSubscriptions,
  methodsByMember,
  outcomesJson,
  billingStatesJson,
  RECORD_OUTCOMES_SQL,
  RELEASE_UNCONFIRMED_SQL,
  releasedJson,
  releaseRefundsSql,
  saveBillingStates,
  saveBillingStatesSql,
  setClaims,
  type ChargeableMethod,
  type PendingEvent,
  type RecordedOutcome,
  type ReleasedRefund,
} from './billing-run-store.js';

/** Counts of one billing run (see proto/billing/v1/billing_runs.proto). */
export interface BillingRunResult {
  asOf: Date;
  charged: number;
  succeeded: number;
  failed: number;
  retried: number;
  terminated: number;
  skipped: number;
}

export interface BillingRunOptions {
  /** Subscriptions claimed per statement. */
  chunkSize: number;
  /** Chunks processed at once (each its own claim, provider calls and commit). */
  workers: number;
  /** Provider calls in flight per worker. */
  concurrency: number;
  /** How long a claim keeps other runs off a subscription or an unconfirmed call. */
  leaseMs: number;
}

/** The provider's answer to one call, or `unavailable` when it could not be had (down, timeout). */
export type CallOutcome = { status: ChargeStatus; providerRef: string; failureReason: string | null } | 'unavailable';

export function dunningPolicyOf(m: Merchant): DunningPolicy {
  return { retryOffsetsDays: parseRetryOffsets(m.billingRetryOffsetsDays), terminalAction: m.billingTerminalAction };
}

/** Writes a transaction's recorded events to the outbox in the caller's transaction. */
export function recordTransactionEvents(em: EntityManager, t: Transaction): void {
  for (const type of t.pullEvents()) recordEvent(em, { type, merchantId: t.merchantId, data: transactionEventData(t, toMajorUnits) });
}

/** Runs `fn` over `items` with at most `width` at once. */
export async function inPool<T, R>(items: T[], width: number, fn: (item: T) => Promise<R>): Promise<R[]> {
  const out = new Array<R>(items.length);
  let next = 0;
  await Promise.all(
    Array.from({ length: Math.min(width, items.length) }, async () => {
      while (next < items.length) {
        const i = next++;
        out[i] = await fn(items[i]!);
      }
    }),
  );
  return out;
}

/**
 * The outcome of one provider call. For a call the provider refused for good (`ProviderRejected`,
 * nothing charged or refunded) of transaction `refusedId`: Failed with `provider_rejected`, like a
 * decline, so it is neither repeated forever nor left unconfirmed.
 */
async function outcomeOf(call: () => Promise<{ status: ChargeStatus; providerRef: string; failureReason: string | null }>, refusedId?: string): Promise<CallOutcome> {
  try {
    return await call();
  } catch (e) {
    if (e instanceof DomainError && e.code === 'provider_unavailable') return 'unavailable';
    if (e instanceof ProviderRejected && refusedId) return { status: 'Failed', providerRef: `none:${refusedId}`, failureReason: PROVIDER_REJECTED };
    throw e;
  }
}

/**
 * A subscription `s` a run ends instead of charging: cancelled at period end, Active, and its
 * current period paid (the SQL of `cancelAtPeriodEnd && !owesCurrentPeriod()`, `claimDue`).
 */
const ENDS_AT_PERIOD_END_SQL = `s.cancel_at_period_end and s.status = 'Active' and s.next_billing_at <> s.current_period_start`;

/**
 * A chunk of due subscriptions to claim (parameters: as of, the ids this run excluded, the chunk
 * size). A subscription with an unconfirmed call waits for reconciliation: its id is among the
 * unconfirmed calls' subscriptions, which the statement reads once and hashes (`not in` on the
 * non-null ids). As `not exists`, a plan made while the statistics said no call was unconfirmed
 * (the partial index `transactions_unconfirmed_index` empty when last analyzed, as after a quiet
 * night) rescanned every unconfirmed call for each due subscription: auto_explain on the writes
 * bench, 1,400 due against 1,000 in flight, 1,400,000 rows compared and 550 ms for one claim.
 * A subscription with a bank debit still settling waits too (its failure is collected before
 * the next period is billed): a second `not in`, on the other partial index
 * (`transactions_settling_index`), since one subquery over both kinds of Processing rows could
 * use neither index and read every transaction for each claim.
 */
export const DUE_SUBSCRIPTIONS_SQL = `select s.id from subscriptions s join merchants m on m.id = s.merchant_id
  where s.status in ('Active','PastDue') and s.next_billing_at <= ?::timestamptz
    and (m.gateway_configured or (${ENDS_AT_PERIOD_END_SQL}))
    and (s.claimed_until is null or s.claimed_until < now())
    and not (s.id = any(?::uuid[]))
    and s.id not in (select t.subscription_id from transactions t
                      where t.status = 'Processing' and t.provider_ref is null and t.subscription_id is not null)
    and s.id not in (select t.subscription_id from transactions t
                      where t.status = 'Processing' and t.provider_ref is not null and t.kind = 'Charge' and t.subscription_id is not null)
  order by s.next_billing_at, s.id limit ? for update of s skip locked`;

/**
 * The charges of some subscriptions (parameter: their ids), to tell the attempt a due period is
 * charged with (after its manual retries, `manual`) and the payment methods already tried in that
 * attempt (its billing-run charges): each subscription's looked up on an index by subscription,
 * in a lateral subquery that `offset 0` keeps the planner from flattening. As
 * `subscription_id = any(…)`, planned on statistics taken before a run made its charges, the
 * read took an index of every charge without an original (or the whole table) and filtered by
 * subscription, each chunk reading all the charges the run had made so far (auto_explain on the
 * billing-run bench: 64,000 rows removed and 109 ms for one chunk).
 */
export const TRIED_CHARGES_SQL = `select t.subscription_id, t.payment_method_id, t.period_start, t.attempt, t.original_transaction_id is not null as manual, t.status = 'Failed' as failed
  from unnest(?::uuid[]) as s(id)
  cross join lateral (select * from transactions t
                       where t.subscription_id = s.id and t.kind = 'Charge' offset 0) t`;

/**
 * One billing run at `asOf` (contract §10), in order:
 * 0. resume the paused subscriptions whose `resumeAt` has come;
 * 1. settle `Processing` bank charges whose settlement window has passed;
 * 2. reconcile provider calls a crashed or cut-off run left unconfirmed, by repeating each call
 *    with its idempotency key (the transaction id): the provider answers the first outcome, or
 *    makes the call now if it never arrived; nothing is charged twice; then end the
 *    subscriptions set to cancel at a period end that has come (`endDue`);
 * 3. charge every due subscription for one period (its next, if it is behind by several, is the
 *    next run's), each payment method in turn until one succeeds: the one the subscription
 *    names first, then the member's others in rank order (`chargeOrder`).
 *
 * Exactly once across concurrent runs and replicas: a subscription is claimed with
 * `FOR UPDATE SKIP LOCKED` plus a lease (`claimed_until`), and its `Processing` transaction is
 * committed before the provider is called, so a crash leaves a record to reconcile rather than a
 * charge nobody knows of. The unique index `transactions_period_unique` is the last guard.
 */
export class BillingRun {
  private readonly result: BillingRunResult;
  /** The period (start, ms) and attempt, `start/attempt`, each subscription has been charged for by this run: one of each per run (see `claimDue`); its size is `charged`. */
  private readonly chargedFor = new Map<string, string>();
  private readonly retried = new Set<string>();
  /** Subscriptions whose charge failed in this run (declined by every method, or at settlement); its size is `failed`. */
  private readonly failed = new Set<string>();
  /**
   * The outcome of each subscription's latest charge by this run, as recorded by it: `unknown`
   * when it got no answer (or a reconciling run recorded it). A declined one is followed by the
   * member's next method or, with none left, the period's failure (`failed`) in a later claim;
   * a subscription cancelled or paused while that charge was in flight is not claimed again, so
   * its declined charge is counted failed at the end of the run (see `execute`).
   */
  private readonly lastCharge = new Map<string, 'paid' | 'declined' | 'unknown'>();
  /** Work that failed unexpectedly in this run is not picked up again by it. */
  private readonly excluded = new Set<string>();

  constructor(
    private readonly orm: MikroORM,
    private readonly providers: PaymentProviders,
    private readonly opts: BillingRunOptions,
    private readonly logger: Logger,
    private readonly asOf: Date,
    /** The service's subscription writes, shared with the API's pause, resume and cancel. */
    private readonly subscriptions: SubscriptionStore,
  ) {
    this.result = { asOf, charged: 0, succeeded: 0, failed: 0, retried: 0, terminated: 0, skipped: 0 };
  }

  async execute(): Promise<BillingRunResult> {
    await this.resumeDue();
    await this.settleBankCharges();
    await this.reconcileUnconfirmed();
    await this.endDue();
    this.result.skipped = await this.countSkipped();
    await Promise.all(Array.from({ length: this.opts.workers }, () => this.chargeDueLoop()));
    this.result.charged = this.chargedFor.size;
    this.result.retried = this.retried.size;
    // Every charge answered is counted once, succeeded or failed: a subscription whose last
    // charge was declined and that was not charged again (it was cancelled or paused while the
    // charge was in flight) failed its attempt, as one with no method left to try.
    for (const [id, last] of this.lastCharge) if (last === 'declined') this.failed.add(id);
    this.result.failed = this.failed.size;
    return this.result;
  }

  /**
   * Subscriptions whose latest charge by this run got no answer it could record (the provider
   * unreachable, failing or too slow): neither succeeded nor failed, left for a later run to
   * reconcile or charge. Read after `execute`.
   */
  unansweredCharges(): number {
    let n = 0;
    for (const last of this.lastCharge.values()) if (last === 'unknown') n++;
    return n;
  }

  private lease(): Date {
    return new Date(Date.now() + this.opts.leaseMs);
  }

  private excludedIds(): string[] {
    return [...this.excluded];
  }

  // ── 0. resumption ─────────────────────────────────────────────────────────────────────────

  /**
   * Resumes the paused subscriptions whose `resumeAt` has come, at their `resumeAt`, as a resume
   * through the API would (`Subscription.resume`, written by the same optimistic transition,
   * with `subscription.resumed`): a pause that covered the next due date starts a new period at
   * `resumeAt`, which this run then charges; one owing a period becomes PastDue, and this run
   * retries it if its retry is due. A subscription changed meanwhile (resumed, cancelled,
   * paused again with another date) is left as it is. One set to cancel at its period end whose
   * paid period has ended by this run (`Subscription.endsWhilePaused`) is cancelled instead,
   * counted as terminated (as `endDue` does without a `resumeAt`). One with a charge whose answer
   * is not recorded (paused while it was in flight, its outcome unknown since) is left for a later
   * run, once reconciliation has recorded it: the period that charge paid for decides the resume
   * (`Subscription.resume`), and resumed before, it would start a new period charged beside it.
   */
  private async resumeDue(): Promise<void> {
    await this.transitionEach(
      `select id from subscriptions where status = 'Paused' and not (id = any(?::uuid[])) and resume_at is not null and resume_at <= ?::timestamptz
        order by resume_at limit ?`,
      [this.asOf.toISOString()],
      (sub, plan, facts) => {
        if (facts.chargeUnanswered) return false;
        if (sub.endsWhilePaused(this.asOf)) {
          sub.endAtPeriodEnd(this.asOf);
          return true;
        }
        if (sub.status !== 'Paused' || !sub.resumeAt || sub.resumeAt > this.asOf) return false;
        // Cannot happen (a foreign key); not a DomainError, so it is logged.
        if (!plan) throw new Error(`plan ${sub.planId} of subscription ${sub.id} is missing`);
        sub.resume(plan, sub.resumeAt);
        return false;
      },
      'resuming a paused subscription at its resumeAt failed; the next run tries again',
    );
  }

  /**
   * Ends the subscriptions set to cancel at their period end whose end has come
   * (`Subscription.endsAtPeriodEnd`) and that charging would not end: one whose period's bank
   * debit is still settling (the charging step leaves it alone until it settles), one PastDue
   * because that period's charge failed (its retries would go on past the cancellation), and
   * one paused since. After settlement and reconciliation, which may have made it PastDue; before
   * charging, so no retry is made after its period end. Counted as terminated. Those few are
   * read through `subscriptions_ending_index`.
   */
  private async endDue(): Promise<void> {
    const asOf = this.asOf.toISOString();
    await this.transitionEach(
      `select id from subscriptions
        where cancel_at_period_end and status <> 'Cancelled' and not (id = any(?::uuid[]))
          and (next_billing_at <= ?::timestamptz or current_period_end <= ?::timestamptz)
        order by id limit ?`,
      [asOf, asOf],
      (sub) => {
        if (!sub.endsAtPeriodEnd(this.asOf)) return false;
        sub.endAtPeriodEnd(this.asOf);
        return true;
      },
      'ending a subscription at its period end failed; the next run tries again',
    );
  }

  /**
   * Applies `change` to each subscription `sql` selects, a chunk at a time, through the
   * optimistic transition of the API's pause, resume and cancel (so a subscription changed
   * meanwhile is decided again on what it is now). `sql` takes the ids already seen, then
   * `params`, then the chunk size. `change` answers whether it ended the subscription (counted
   * terminated). A subscription whose change fails is logged (`failure`) and left for the next run.
   */
  private async transitionEach(
    sql: string,
    params: unknown[],
    change: (sub: Subscription, plan: BillingSchedule | undefined, facts: TransitionFacts) => boolean,
    failure: string,
  ): Promise<void> {
    const seen = new Set<string>();
    for (;;) {
      const rows = await queryRows<{ id: string }>(this.orm.em.fork(), sql, [[...seen], ...params, this.opts.chunkSize]);
      if (rows.length === 0) return;
      await Promise.all(
        rows.map(async ({ id }) => {
          seen.add(id);
          try {
            let ended = false;
            await this.subscriptions.transition({ scope: { kind: 'platform' }, id, change: (sub, plan, facts) => void (ended = change(sub, plan, facts)) });
            if (ended) this.result.terminated++;
          } catch (e) {
            this.logger.warn({ err: e, subscriptionId: id }, failure);
          }
        }),
      );
    }
  }

  // ── 1. bank settlement ────────────────────────────────────────────────────────────────────

  private async settleBankCharges(): Promise<void> {
    for (;;) {
      const claimed = await this.orm.em.fork().transactional(async (em) => {
        // SKIP LOCKED + lease: concurrent runs settle disjoint charges.
        const rows = await queryRows<{ id: string }>(
          em,
          `select t.id from transactions t join merchants m on m.id = t.merchant_id
            where t.kind = 'Charge' and t.status = 'Processing' and t.provider_ref is not null
              and t.occurred_at + make_interval(days => m.bank_settlement_window_days) <= ?::timestamptz
              and (t.claimed_until is null or t.claimed_until < now()) and not (t.id = any(?::uuid[]))
            order by t.occurred_at limit ? for update of t skip locked`,
          [this.asOf.toISOString(), this.excludedIds(), this.opts.chunkSize],
        );
        if (rows.length === 0) return [];
        const txns = await em.find(Transaction, { id: { $in: rows.map((r) => r.id) } });
        const until = this.lease();
        for (const t of txns) t.claimedUntil = until;
        return txns.map((t) => ({ id: t.id, merchantId: t.merchantId, providerRef: t.providerRef! }));
      });
      if (claimed.length === 0) return;
      const merchants = await this.merchantsById(claimed.map((c) => c.merchantId));
      const outcomes = await withoutCallSpans(() => inPool(claimed, this.opts.concurrency, async (c) => {
        const m = merchants.get(c.merchantId)!;
        // An environment without a provider (the merchant moved since) leaves the charge to settle later.
        return outcomeOf(async () => {
          const r = await this.providers.forEnvironment(m.providerEnvironment).settle(c.merchantId, c.providerRef);
          return { status: r.status, providerRef: r.providerChargeId, failureReason: r.failureReason };
        });
      }));
      await this.orm.em.fork().transactional(async (em) => {
        const txns = new Map((await em.find(Transaction, { id: { $in: claimed.map((c) => c.id) } })).map((t) => [t.id, t]));
        const subs = await this.subscriptionsById(em, [...txns.values()].map((t) => t.subscriptionId).filter((id): id is string => id !== null));
        claimed.forEach((c, i) => {
          const t = txns.get(c.id)!;
          const outcome = outcomes[i]!;
          t.claimedUntil = null;
          if (outcome === 'unavailable' || outcome.status === 'Processing') {
            this.excluded.add(t.id);
            return;
          }
          t.applyOutcome({ ...outcome, providerRef: t.providerRef! }, this.asOf);
          if (t.status === 'Failed' && t.subscriptionId) {
            const sub = subs.get(t.subscriptionId);
            const m = merchants.get(t.merchantId)!;
            // Its period is the current one, or the one before when a resume started a new one
            // meanwhile: no other charge is made while a bank debit settles (`DUE_SUBSCRIPTIONS_SQL`).
            if (sub && t.periodStart && t.periodStart.getTime() <= sub.currentPeriodStart.getTime()) {
              const o = sub.recordFailedSettlement(t.periodStart, t.attempt, dunningPolicyOf(m), this.asOf);
              if (o) this.failed.add(sub.id);
              if (o === 'terminated') this.result.terminated++;
              recordSubscriptionEvents(em, sub);
            }
          }
          recordTransactionEvents(em, t);
        });
      });
    }
  }

  // ── 2. reconciliation ─────────────────────────────────────────────────────────────────────

  private async reconcileUnconfirmed(): Promise<void> {
    for (;;) {
      const claimed = await this.orm.em.fork().transactional(async (em) => {
        // Unconfirmed calls whose lease has passed: their run crashed or the provider did not answer.
        const rows = await queryRows<{ id: string }>(
          em,
          `select id from transactions
            where status = 'Processing' and provider_ref is null and (claimed_until is null or claimed_until < now())
              and not (id = any(?::uuid[]))
            order by created_at limit ? for update skip locked`,
          [this.excludedIds(), this.opts.chunkSize],
        );
        if (rows.length === 0) return [];
        const txns = await em.find(Transaction, { id: { $in: rows.map((r) => r.id) } });
        const until = this.lease();
        const now = new Date();
        for (const t of txns) {
          t.claimedUntil = until;
          // Taken up here, its call's outcome is unknown even if the request that made it never said so (it crashed).
          t.outcomeUnknownAt ??= now;
        }
        return txns;
      });
      if (claimed.length === 0) return;
      for (const t of claimed) this.excluded.add(t.id);
      const outcomes = await this.callProvider(claimed, {}, 'repeat');
      try {
        // Not `+= await`: that reads the count before the await, losing a concurrent worker's additions.
        const { succeeded } = await applyCallOutcomes(this.orm, claimed, outcomes, this.asOf);
        this.result.succeeded += succeeded;
      } catch (err) {
        // A chunk whose answers cannot be recorded stays unconfirmed (its claim lapses; the provider
        // keeps its answers under the transactions' keys) and is logged, rather than failing this
        // run and every later one before they charge anybody: reconciliation comes first.
        this.logger.error({ err, transactionIds: claimed.map((t) => t.id) }, 'recording reconciled provider answers failed; they stay unconfirmed');
      }
    }
  }

  // ── 3. charging ───────────────────────────────────────────────────────────────────────────

  /** Due subscriptions of merchants without gateway credentials, or whose environment has no payment provider: counted, not charged. */
  private async countSkipped(): Promise<number> {
    const rows = await queryRows<{ n: number }>(
      this.orm.em.fork(),
      `select count(*)::int as n from subscriptions s join merchants m on m.id = s.merchant_id
        where s.status in ('Active','PastDue') and s.next_billing_at <= ?::timestamptz
          and (not m.gateway_configured or m.provider_environment = any(?::text[]))
          and not (${ENDS_AT_PERIOD_END_SQL})`,
      [this.asOf.toISOString(), PROVIDER_ENVIRONMENTS.filter((e) => !this.providers.configuredFor(e))],
    );
    return rows[0]!.n;
  }

  private async chargeDueLoop(): Promise<void> {
    for (;;) {
      const t0 = performance.now();
      const chunk = await this.claimDue();
      if (chunk === null) return;
      const claimed = chunk.charges;
      if (claimed.length === 0) continue;
      const t1 = performance.now();
      const outcomes = await this.callProvider(claimed, chunk, 'first');
      const t2 = performance.now();
      // Not `+= await`: that reads the count before the await, losing a concurrent worker's additions.
      const { succeeded, recorded } = await applyCallOutcomes(this.orm, claimed, outcomes, this.asOf);
      this.result.succeeded += succeeded;
      for (const t of claimed) this.lastCharge.set(t.subscriptionId!, !recorded.has(t.id) ? 'unknown' : t.status === 'Failed' ? 'declined' : 'paid');
      const ms = (a: number, b: number) => Math.round(b - a);
      this.logger.debug({ charges: claimed.length, claimMs: ms(t0, t1), callsMs: ms(t1, t2), recordMs: ms(t2, performance.now()) }, 'billing run chunk');
    }
  }

  /**
   * Claims a chunk of due subscriptions and writes, in one transaction, a `Processing` charge
   * for each on its next untried payment method; subscriptions with nothing left to try get
   * their failure recorded, and those set to end at period end are ended. Null when nothing
   * is due any more.
   */
  private async claimDue(): Promise<ClaimedChunk | null> {
    return this.orm.em.fork().transactional(async (em) => {
      // SKIP LOCKED: concurrent runs (replicas) claim disjoint chunks; the lease keeps them off
      // after this commits, while the provider calls run; a subscription with an unconfirmed
      // call waits for reconciliation.
      const rows = await queryRows<{ id: string }>(em, DUE_SUBSCRIPTIONS_SQL, [this.asOf.toISOString(), this.excludedIds(), this.opts.chunkSize]);
      if (rows.length === 0) return null;
      const subs = await loadSubscriptions(em, rows.map((r) => r.id));
      const merchants = await merchantsById(em, subs.map((s) => s.merchantId));
      const plans = new Map((await em.find(Plan, { id: { $in: [...new Set(subs.map((s) => s.planId))] } }, { disableIdentityMap: true })).map((p) => [p.id, p]));
      const methods = methodsByMember(await loadPaymentMethods(em, { memberIds: [...new Set(subs.map((s) => s.memberId))] }));
      const triedRows = await queryRows<{ subscription_id: string; payment_method_id: string | null; period_start: Date | string; attempt: number; manual: boolean; failed: boolean }>(em, TRIED_CHARGES_SQL, [
        subs.map((s) => s.id),
      ]);
      const byId = new Map(subs.map((s) => [s.id, s]));
      const ofDuePeriod = triedRows.filter((r) => instantOfRow(r.period_start).getTime() === byId.get(r.subscription_id)!.duePeriodStart()?.getTime());
      // Each due period's attempt: the dunning's (`chargeAttempt`), moved on by one for each
      // manual retry of the period, which takes the next attempt number without counting as a
      // retry of the ladder, so the numbers of a period's charges keep increasing.
      const attempts = new Map(subs.map((s) => [s.id, s.chargeAttempt()]));
      for (const r of ofDuePeriod) if (r.manual) attempts.set(r.subscription_id, attempts.get(r.subscription_id)! + 1);
      // Methods already tried in each subscription's attempt (earlier chunks of this or a crashed
      // run), and those that failed the period in an earlier attempt (declined, or a bank debit
      // that failed at settlement), which this attempt tries after the others.
      const tried = new Map<string, Set<string>>();
      const failedEarlier = new Map<string, Set<string>>();
      const add = (m: Map<string, Set<string>>, sub: string, pm: string) => (m.get(sub) ?? m.set(sub, new Set()).get(sub)!).add(pm);
      for (const r of ofDuePeriod) {
        if (!r.payment_method_id) continue;
        if (!r.manual && r.attempt === attempts.get(r.subscription_id)) add(tried, r.subscription_id, r.payment_method_id);
        else if (r.failed && r.attempt < attempts.get(r.subscription_id)!) add(failedEarlier, r.subscription_id, r.payment_method_id);
      }

      const until = this.lease();
      const charges: Transaction[] = [];
      /** Charges recorded Failed without a provider call (the member had no payment method). */
      const failedWithoutCall: Transaction[] = [];
      const changed: Subscription[] = [];
      const events: PendingEvent[] = [];
      for (const sub of subs) {
        const merchant = merchants.get(sub.merchantId)!;
        const plan = plans.get(sub.planId);
        // Ends at the end of its paid period; one that still owes its current period (a new
        // subscription whose first charge is due) is charged for it first.
        if (sub.endsAtPeriodEnd(this.asOf)) {
          sub.endAtPeriodEnd(this.asOf);
          this.result.terminated++;
          changed.push(sub);
          events.push(...subscriptionEvents(sub));
          continue;
        }
        // One period and one attempt per subscription and run: a subscription behind by several
        // periods (its merchant had no gateway, a run at a distant asOf) is not charged for all
        // of them at once, nor is a card declined again at once for each retry whose date has
        // passed; the next run (the scheduler's, a minute later) makes the next. The same period
        // and attempt come back in this run only to fall back to the member's next method.
        const attempt = attempts.get(sub.id)!;
        const due = `${sub.duePeriodStart()!.getTime()}/${attempt}`;
        const earlier = this.chargedFor.get(sub.id);
        // A merchant whose environment has no provider is not charged (nothing could be sent), as
        // one without gateway credentials: no Processing charge is left for a later run to call.
        if (!plan || !merchant.gatewayConfigured || !this.providers.configuredFor(merchant.providerEnvironment) || (earlier !== undefined && earlier !== due)) {
          this.excluded.add(sub.id);
          continue;
        }
        // Nothing past the year 9999 is billed: a period that would end after it cannot be stored.
        if (!storable(periodEnd(sub.duePeriodStart()!, plan, sub.billingAnchor))) {
          this.excluded.add(sub.id);
          continue;
        }
        this.chargedFor.set(sub.id, due);
        // A retry tries first the methods that have not failed this period: a bank account that
        // failed at settlement (its first try looked like a success) is not retried before a card.
        const next = chargeOrder(methods.get(sub.memberId) ?? [], sub, failedEarlier.get(sub.id)).find((pm) => !tried.get(sub.id)?.has(pm.id));
        if (sub.chargeAttempt() > 1) this.retried.add(sub.id);
        if (!next) {
          // Every method declined (or the member has none): the period's charge failed. With no
          // method at all nothing was sent, but the attempt is recorded all the same, as a Failed
          // charge (`no_payment_method`, transaction.failed): the merchant sees why the
          // subscription is PastDue, and can retry it once the member has a method.
          if ((methods.get(sub.memberId) ?? []).length === 0) {
            const none = Object.assign(new Transaction(), {
              merchantId: sub.merchantId,
              memberId: sub.memberId,
              subscriptionId: sub.id,
              kind: 'Charge' as const,
              amountMinor: plan.amountMinor,
              currency: plan.currency,
              attempt,
              periodStart: sub.duePeriodStart(),
              occurredAt: this.asOf,
            });
            none.applyOutcome({ status: 'Failed', providerRef: `none:${none.id}`, failureReason: NO_PAYMENT_METHOD }, this.asOf);
            failedWithoutCall.push(none);
            events.push(...none.pullEvents().map((type) => ({ type, merchantId: none.merchantId, data: transactionEventData(none, toMajorUnits) })));
          }
          const outcome = sub.recordFailedCharge(dunningPolicyOf(merchant), this.asOf);
          this.failed.add(sub.id);
          if (outcome === 'terminated') this.result.terminated++;
          changed.push(sub);
          events.push(...subscriptionEvents(sub));
          continue;
        }
        const t = Object.assign(new Transaction(), {
          merchantId: sub.merchantId,
          memberId: sub.memberId,
          subscriptionId: sub.id,
          paymentMethodId: next.id,
          kind: 'Charge' as const,
          amountMinor: plan.amountMinor,
          currency: plan.currency,
          attempt,
          periodStart: sub.duePeriodStart(),
          feeMinor: platformFee(plan.amountMinor, plan.currency, merchant.feeTerms()),
          claimedUntil: until,
          occurredAt: this.asOf,
        });
        charges.push(t);
      }
      await insertTransactions(em, [...charges, ...failedWithoutCall]);
      await setClaims(em, charges.map((t) => t.subscriptionId!), until);
      await saveBillingStates(em, changed);
      await insertEvents(em, events);
      return { charges, merchants, methods: new Map([...methods.values()].flat().map((pm) => [pm.id, pm])) };
    });
  }

  /** Calls the provider for each unconfirmed transaction, with its id as the idempotency key; no span per call (see `withoutCallSpans`). */
  private callProvider(txns: Transaction[], known: Known, calls: CallsMade): Promise<CallOutcome[]> {
    return withoutCallSpans(() => callProviderFor(this.orm, this.providers, txns, this.opts.concurrency, known, calls));
  }

  private async merchantsById(ids: string[], em: EntityManager = this.orm.em.fork()): Promise<Map<string, Merchant>> {
    return merchantsById(em, ids);
  }

  private async subscriptionsById(em: EntityManager, ids: string[]): Promise<Map<string, Subscription>> {
    return subscriptionsById(em, ids);
  }
}

/** Read-only: outside the unit of work. */
async function merchantsById(em: EntityManager, ids: string[]): Promise<Map<string, Merchant>> {
  const unique = [...new Set(ids)];
  return new Map((unique.length ? await em.find(Merchant, { id: { $in: unique } }, { disableIdentityMap: true }) : []).map((m) => [m.id, m]));
}

/** The outbox events a subscription's transitions caused (`recordSubscriptionEvents`, for a bulk insert). */
function subscriptionEvents(sub: Subscription): PendingEvent[] {
  return sub.pullEvents().map((type) => ({ type, merchantId: sub.merchantId, data: sub.toView() }));
}

async function subscriptionsById(em: EntityManager, ids: string[]): Promise<Map<string, Subscription>> {
  const unique = [...new Set(ids)];
  return new Map((unique.length ? await em.find(Subscription, { id: { $in: unique } }) : []).map((s) => [s.id, s]));
}

/**
 * What a caller has loaded already of what provider calls need (read in the claim of a chunk,
 * or in the reservation of refunds and retries): merchants' provider environments, payment
 * methods, refunds' charges' provider refs. `callProviderFor` reads only what is missing.
 */
export interface Known {
  merchants?: Map<string, Pick<Merchant, 'providerEnvironment'>>;
  methods?: Map<string, ChargeableMethod>;
  originals?: Map<string, Pick<Transaction, 'providerRef'>>;
}

/** A claimed chunk: its Processing charges, and what was read to make them. */
interface ClaimedChunk {
  charges: Transaction[];
  merchants: Map<string, Merchant>;
  methods: Map<string, ChargeableMethod>;
}

/** The ids of `ids` not in `known`, once each. */
function missing(ids: Iterable<string>, known: Map<string, unknown> | undefined): string[] {
  return [...new Set(ids)].filter((id) => !known?.has(id));
}

/**
 * Whether the calls are the transactions' first (freshly committed `Processing` transactions
 * nobody has called the provider for) or repeats of calls whose outcome is unknown.
 */
export type CallsMade = 'first' | 'repeat';

/**
 * Calls the provider for each unconfirmed transaction, with its id as the idempotency key,
 * `concurrency` at a time. A transaction whose merchant's environment has no provider is not
 * called: on its first call that is a definite outcome, Failed with `provider_not_configured`
 * (nothing was sent, so nothing was charged or refunded, and a refund's reservation is given
 * back); a repeat stays unconfirmed (`unavailable`), since its first call may have reached the
 * provider the merchant had then.
 */
export async function callProviderFor(orm: MikroORM, providers: PaymentProviders, txns: Transaction[], concurrency: number, known: Known, calls: CallsMade): Promise<CallOutcome[]> {
  const em = orm.em.fork();
  const merchants = new Map(known.merchants);
  const merchantIds = missing(txns.map((t) => t.merchantId), merchants);
  // Hand-mapped single statements, as `loadPaymentMethods`: these reads are on every refund's and retry's path.
  if (merchantIds.length) {
    for (const m of await queryRows<{ id: string; provider_environment: Merchant['providerEnvironment'] }>(em, `select id, provider_environment from merchants where id = any(?::uuid[])`, [merchantIds])) {
      merchants.set(m.id, { providerEnvironment: m.provider_environment });
    }
  }
  const methods = new Map(known.methods);
  const pmIds = missing(txns.flatMap((t) => (t.kind === 'Charge' && t.paymentMethodId !== null ? [t.paymentMethodId] : [])), methods);
  for (const pm of await loadPaymentMethods(em, { ids: pmIds })) methods.set(pm.id, pm);
  const originals = new Map(known.originals);
  const originalIds = missing(txns.flatMap((t) => (t.kind === 'Refund' ? [t.originalTransactionId!] : [])), originals);
  if (originalIds.length) {
    for (const o of await queryRows<{ id: string; provider_ref: string | null }>(em, `select id, provider_ref from transactions where id = any(?::uuid[])`, [originalIds])) {
      originals.set(o.id, { providerRef: o.provider_ref });
    }
  }
  return inPool(txns, concurrency, async (t): Promise<CallOutcome> => {
    const environment = merchants.get(t.merchantId)!.providerEnvironment;
    if (!providers.configuredFor(environment)) {
      return calls === 'first' ? { status: 'Failed', providerRef: `none:${t.id}`, failureReason: PROVIDER_NOT_CONFIGURED } : 'unavailable';
    }
    return callFor(providers.forEnvironment(environment), t, methods, originals);
  });
}

/** The provider call a transaction stands for, made (or repeated) with its id as the idempotency key. */
export function callFor(provider: PaymentProvider, t: Transaction, methods: Map<string, ChargeableMethod>, originals: Map<string, Pick<Transaction, 'providerRef'>>): Promise<CallOutcome> {
  if (t.kind === 'Refund') {
    const charge = originals.get(t.originalTransactionId!);
    if (!charge?.providerRef) return Promise.resolve({ status: 'Failed', providerRef: `none:${t.id}`, failureReason: 'charge_not_found' });
    return outcomeOf(async () => {
      const r = await provider.refund({ account: t.merchantId, idempotencyKey: t.id, providerChargeId: charge.providerRef!, amountMinor: t.amountMinor, currency: t.currency });
      return { status: r.status, providerRef: r.providerRefundId, failureReason: r.failureReason };
    }, t.id);
  }
  const pm = t.paymentMethodId ? methods.get(t.paymentMethodId) : undefined;
  if (!pm) return Promise.resolve({ status: 'Failed', providerRef: `none:${t.id}`, failureReason: 'payment_method_removed' });
  return outcomeOf(async () => {
    const r = await provider.charge({ account: t.merchantId, idempotencyKey: t.id, amountMinor: t.amountMinor, currency: t.currency, instrument: { token: pm.providerToken, type: pm.type, last4: pm.last4 } });
    return { status: r.status, providerRef: r.providerChargeId, failureReason: r.failureReason };
  }, t.id);
}

/**
 * Records the provider's answers: each transaction's outcome, and for a charge its
 * subscription's next state (period advanced on Settled or Processing; on Failed the next
 * payment method is tried by a later claim, or the failure is recorded when none is left). An
 * unavailable provider leaves the call unconfirmed, for the next run to reconcile. An answer for
 * a transaction confirmed meanwhile (by a reconciling run) is dropped: it was applied once.
 * Returns how many charges of subscriptions it recorded Settled or Processing (`succeeded`), whether
 * or not they moved their subscription on (one cancelled in flight does not), and the ids of the
 * transactions whose outcome it recorded (`recorded`). It applies every answer to its
 * in-memory transaction (`Transaction.applyOutcome`): those it recorded are as stored; a caller
 * that needs one it did not record reads it back. `traceContexts` (one per transaction), when
 * the transactions are different requests', gives each one's events its request's trace.
 *
 * The writes are one statement (`recordOutcomesOnce`), where a transaction of a statement per
 * kind of row took up to nine round trips. When no answer moves a subscription on (every charge
 * failed or got no answer, or the batch is refunds), that statement is all, autocommit: it reads
 * nothing. Otherwise it runs in a transaction after a locking read of the charges'
 * subscriptions with their plans (in id order, the lock order of every writer of a chunk), for
 * the read-modify-write of their billing state: four round trips.
 */
export async function applyCallOutcomes(
  orm: MikroORM,
  txns: Transaction[],
  outcomes: CallOutcome[],
  asOf: Date,
  traceContexts?: Record<string, string>[],
): Promise<{ succeeded: number; recorded: Set<string> }> {
  const subIds = [...new Set(txns.filter((t) => t.kind === 'Charge' && t.subscriptionId).map((t) => t.subscriptionId!))];
  const movesOn = txns.some((t, i) => t.kind === 'Charge' && t.subscriptionId && advancesPeriod(outcomes[i]!));
  const batch = { txns, outcomes, asOf, subIds, traceContexts };
  if (!movesOn) return recordOutcomesOnce(pooledQuery(orm), batch, { subs: new Map(), plans: new Map() });
  return transactPrepared(orm, async (db) => {
    // A subscription's plan always exists (a foreign key), so its schedule is never null here.
    const rows = await queryRows<{ sub: SubscriptionRow; plan_interval: BillingSchedule['interval']; plan_interval_count: number }>(db, subscriptionsWithPlansSql('?', { lock: true }), [subIds]);
    return recordOutcomesOnce(db, batch, {
      subs: new Map(rows.map((r) => [r.sub.id, subscriptionOfRow(r.sub)])),
      plans: new Map(rows.map((r) => [r.sub.plan_id, { interval: r.plan_interval, intervalCount: r.plan_interval_count }])),
    });
  });
}

/** Whether a charge's answer moves its subscription on (when it is the one collecting the subscription's due period). */
const advancesPeriod = (o: CallOutcome) => o !== 'unavailable' && (o.status === 'Settled' || o.status === 'Processing');

/**
 * The statement of `applyCallOutcomes`, its writes as CTEs: it records each answer
 * (`RECORD_OUTCOMES_SQL`), releases the claims of unanswered calls, gives the reservations of the
 * refused refunds it recorded back to their charges, writes the billing states of the
 * subscriptions the charges it recorded moved on, releases the claims of the batch's other
 * subscriptions, and writes the events of the transactions it recorded. Everything but the
 * recording itself is decided beforehand, on the answers applied to the in-memory transactions
 * (and `locked`, the subscriptions read under their locks), and written only for the
 * transactions the statement recorded.
 */
async function recordOutcomesOnce(
  db: SqlContext,
  batch: { txns: Transaction[]; outcomes: CallOutcome[]; asOf: Date; subIds: string[]; traceContexts?: Record<string, string>[] },
  locked: { subs: Map<string, Subscription>; plans: Map<string, BillingSchedule> },
): Promise<{ succeeded: number; recorded: Set<string> }> {
  const { txns, outcomes, asOf, subIds, traceContexts } = batch;
  const answered: RecordedOutcome[] = [];
  const unanswered: string[] = [];
  const refused: ReleasedRefund[] = [];
  const advanced: Subscription[] = [];
  const advancedBy: string[] = [];
  /** Charges of subscriptions that succeeded (or are processing), whether or not they moved their subscription on. */
  const succeeded: string[] = [];
  const events: (OutboxJsonRow & { transaction_id: string })[] = [];
  const occurredAt = new Date();
  const callerTrace = injectTraceHeaders();
  const event = (t: Transaction, i: number, e: { type: string; merchantId: string; data: Record<string, unknown> }) =>
    events.push({ ...toOutboxJsonRow(events.length, { ...e, traceContext: traceContexts?.[i] ?? callerTrace, occurredAt }), transaction_id: t.id });
  txns.forEach((t, i) => {
    const o = outcomes[i]!;
    if (o === 'unavailable') {
      unanswered.push(t.id);
      return;
    }
    answered.push(recordedOutcomeOf(t, o, asOf));
    t.applyOutcome(o, asOf);
    for (const type of t.pullEvents()) event(t, i, { type, merchantId: t.merchantId, data: transactionEventData(t, toMajorUnits) });
    if (t.kind === 'Refund') {
      if (t.status === 'Failed') refused.push(releasedRefundOf(t));
      return;
    }
    if (t.subscriptionId && advancesPeriod(o)) succeeded.push(t.id);
    const sub = t.subscriptionId ? locked.subs.get(t.subscriptionId) : undefined;
    if (!sub || !t.periodStart || !advancesPeriod(o)) return;
    const schedule = locked.plans.get(sub.planId)!;
    const processing = o.status === 'Processing';
    if (sub.status === 'Active' || sub.status === 'PastDue') {
      if (sub.duePeriodStart()?.getTime() !== t.periodStart.getTime()) return;
      sub.advancePeriod(schedule, asOf, { processing });
    } else if (!sub.recordPaidWhilePaused(t.periodStart, schedule, asOf, { processing })) {
      // Cancelled while the charge was in flight (or it paid a period no longer held): the
      // charge stands as recorded (a refund is the merchant's call); nothing is billed again.
      return;
    }
    sub.claimedUntil = null;
    advanced.push(sub);
    advancedBy.push(t.id);
    for (const e of subscriptionEvents(sub)) event(t, i, e);
  });
  // Unnamed (`queryRows`), as the statements of a billing run's recording: planned with the tables as they are.
  const [row] = await queryRows<{ recorded: string[] }>(
    db,
    `with recorded as (${RECORD_OUTCOMES_SQL}),
     released as (${releaseRefundsSql('recorded')}),
     unconfirmed as (${RELEASE_UNCONFIRMED_SQL}),
     advanced as (${saveBillingStatesSql('recorded')}),
     unclaimed as (update subscriptions set claimed_until = null where id = any(?::uuid[]) and id not in (select id from advanced)),
     written as (${insertOutboxSql('?', { column: 'transaction_id', written: 'recorded' })})
     select coalesce((select json_agg(id) from recorded), '[]') as recorded`,
    [
      asOf.toISOString(), outcomesJson(answered), releasedJson(refused), occurredAt.toISOString(), unanswered,
      billingStatesJson(advanced, advancedBy), advanced.map((s) => s.id), subIds, JSON.stringify(events),
    ],
  );
  const recorded = new Set(row!.recorded);
  // Counted as recorded, so a charge confirmed meanwhile by a reconciling run is that run's; one
  // whose subscription was cancelled while it was in flight counts too (it stands, as recorded).
  return { succeeded: succeeded.filter((id) => recorded.has(id)).length, recorded };
}

/** A provider's answer as `RECORD_OUTCOMES_SQL` records it on transaction `t`. */
function recordedOutcomeOf(t: Transaction, o: Exclude<CallOutcome, 'unavailable'>, asOf: Date): RecordedOutcome {
  return { id: t.id, status: o.status, providerRef: o.providerRef, failureReason: o.status === 'Failed' ? (o.failureReason ?? 'failed') : null, settledAt: o.status === 'Settled' ? asOf : null };
}

/** A refused refund's reservation, to give back to its charge. */
const releasedRefundOf = (t: Transaction): ReleasedRefund => ({ chargeId: t.originalTransactionId!, amountMinor: t.amountMinor, refundId: t.id });

