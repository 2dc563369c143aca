import type { MikroORM } from '@mikro-orm/postgresql';
import { DomainError, isUuidText } from '@billing/contracts';
import { Batcher, faultInjector, insertOutboxSql, queryPrepared, rowsByItem, scopeOfMerchant, toOutboxJsonRow, type Logger, type OutboxJsonRow } from '@billing/service-runtime';
import { injectTraceHeaders } from '@billing/telemetry';
import type { CompletionResult__Output as CompletionResult } from '@billing/proto-types/checkout/v1/CompletionResult';
import type { CheckoutBackends } from '../backends.js';
import { CheckoutSession, type SessionStatus } from '../sessions/session.js';

export type CompletionStep = 'after-customer' | 'after-enrolment';

export interface CompletionOptions {
  leaseSeconds: number;
  /** Test-only fault: kill this process after the step named in the file (see config). */
  faultFile?: string;
  logger: Logger;
}

/** What a completion attempt reads of its session when it starts (the columns, named as the entity names them). */
interface TakenSession {
  id: string;
  merchantId: string;
  planId: string;
  subscriptionId: string;
  returnUrl: string;
  email: string | null;
  firstName: string | null;
  lastName: string | null;
  phone: string | null;
  status: SessionStatus;
  /** The provider token was captured for this session. */
  tokenCaptured: boolean;
  /** This attempt holds the session's completion lease. */
  leased: boolean;
}

const completed = (s: { returnUrl: string }): CompletionResult => ({ status: 'Completed', returnUrl: s.returnUrl, failureKind: '' });
/**
 * Why a completion failed: its status is 409 for `subscription_exists` and `plan_inactive` (the
 * state of the merchant's data), else 400 (what the customer sent or left out).
 */
type FailureKind = 'invalid_token' | 'subscription_exists' | 'customer_incomplete' | 'invalid_customer' | 'plan_inactive';
const failed = (s: { returnUrl: string }, kind: FailureKind, reason: string): CompletionResult => ({ status: 'Failed', returnUrl: s.returnUrl, failureReason: reason, failureKind: kind });
/** The session's customer details, refused by identity or billing: the fields they named. */
function invalidCustomer(s: { returnUrl: string }, e: DomainError): CompletionResult {
  const fields = Object.keys(e.extensions.errors ?? {}).join(', ');
  return failed(s, 'invalid_customer', `The customer's details are not valid${fields ? ` (${fields})` : ''}: correct them with PATCH /api/Checkout/sessions/me/customer.`);
}


// The completion's statements. Each also names its rows by array parameters (`= any($n)`):
// joined to the recordset alone (which the planner takes for 100 rows), their generic plans (they
// are named, prepared once per connection) were hash joins over scans of every session and bank
// token, a read of the whole tables per batch once they held some thousands of rows (found with
// auto_explain on the writes bench; tested in complete-session.int.test.ts).
/** $1: the takes (i, id, merchant_id, token) as JSON; $2: the lease in seconds; $3: the tokens; $4: the session ids. */
export const TAKE_SESSION_SQL = `with r as (select * from jsonb_to_recordset($1::jsonb) as r(i int, id uuid, merchant_id uuid, token text)),
         captured as (select r.i from r join bank_tokens b on b.token = r.token and b.session_id = r.id and b.token = any($3::text[])),
         leased as (
           update sessions u set completion_lease_until = now() + make_interval(secs => $2), completion_token = r.token, updated_at = now()
             from r
            where u.id = r.id and u.id = any($4::uuid[]) and u.merchant_id = r.merchant_id and u.status = 'Open'
              and (u.completion_lease_until is null or u.completion_lease_until < now())
              and coalesce(u.email, '') <> '' and coalesce(u.first_name, '') <> '' and coalesce(u.last_name, '') <> ''
              and r.i in (select i from captured)
           returning r.i)
         select r.i, s.id, s.merchant_id as "merchantId", s.plan_id as "planId", s.subscription_id as "subscriptionId", s.return_url as "returnUrl",
                s.email, s.first_name as "firstName", s.last_name as "lastName", s.phone, s.status,
                r.i in (select i from captured) as "tokenCaptured",
                r.i in (select i from leased) as leased
           from r join sessions s on s.id = r.id and s.id = any($4::uuid[]) and s.merchant_id = r.merchant_id`;
/** $1: the finishes as JSON; $2: their `checkout.completed` outbox rows as JSON; $3: the session ids. */
export const FINISH_SESSION_SQL = `with f as (select * from jsonb_to_recordset($1::jsonb) as f(id uuid, customer_account_id uuid, member_id uuid, payment_method_id uuid, completed_at timestamptz)),
         done as (
           update sessions s set status = 'Completed', completion_lease_until = null, customer_account_id = f.customer_account_id, member_id = f.member_id,
                  payment_method_id = f.payment_method_id, completed_at = f.completed_at, updated_at = f.completed_at
             from f
            where s.id = f.id and s.id = any($3::uuid[]) and s.status = 'Open'
            returning s.id)
         ${insertOutboxSql('$2', { column: 'session_id', written: 'done' })}`;

/**
 * Completes a checkout session: one business operation across identity and billing. Each step
 * is repeatable and keyed by what the session already fixes (the email, the token, the
 * subscription id chosen at session creation), so an attempt that died half way is finished by
 * the next one, which converges on the same account, member, payment method and subscription.
 * The session becomes Completed and `checkout.completed` is written to the outbox by one
 * statement, once. An attempt costs checkout two statements (take the lease, complete), each
 * shared with the attempts that arrive with it, besides one call to identity (the account) and
 * one to billing (the enrolment: member, payment method and subscription), made at once.
 */
export class SessionCompletion {
  private readonly fault: (step: CompletionStep) => void;

  constructor(
    private readonly orm: MikroORM,
    private readonly backends: CheckoutBackends,
    private readonly opts: CompletionOptions,
  ) {
    this.fault = faultInjector(opts.faultFile, opts.logger, 'a checkout completion');
  }

  async complete(merchantId: string, sessionId: string, providerToken: string): Promise<CompletionResult> {
    const session = isUuidText(sessionId) ? await this.take(merchantId, sessionId.toLowerCase(), providerToken) : undefined;
    if (!session) throw new DomainError('not_found', 'Checkout session not found.');
    if (session.status === 'Completed') return completed(session);
    if (!session.tokenCaptured) return failed(session, 'invalid_token', 'The provider token is unknown or was not captured for this checkout session.');
    // interface.md: complete's 400 and 409 answer a completion result, which the hosted page acts on.
    const missing = (['email', 'firstName', 'lastName'] as const).filter((f) => !session[f]);
    if (missing.length) return failed(session, 'customer_incomplete', `The customer's ${missing.join(', ')} must be given first (PATCH /api/Checkout/sessions/me/customer).`);

    if (!session.leased) {
      const now = await this.orm.em.fork().findOneOrFail(CheckoutSession, { id: session.id });
      return now.isCompleted() ? completed(now) : { status: 'Pending', failureKind: '' };
    }
    let finished = false;
    try {
      const result = await this.provision(session, providerToken);
      finished = result.status === 'Completed';
      return result;
    } finally {
      // A completed session's lease was cleared by the statement that completed it.
      if (!finished) await this.release(session.id);
    }
  }

  /**
   * The session of the merchant, whether `providerToken` was captured for it, and its lease for
   * this attempt, taken when it is open, complete enough and not held by another attempt (an
   * atomic UPDATE decides between concurrent attempts: no read-then-write race). Undefined when
   * the merchant has no such session. The takes that arrive together are one statement; two of
   * one session never share it (the later goes in the next, which may run at the same time), so
   * the UPDATE decides each on its own.
   */
  private take(merchantId: string, sessionId: string, providerToken: string): Promise<TakenSession | undefined> {
    return this.takes.submit({ sessionId, merchantId, providerToken });
  }

  private readonly takes = new Batcher<{ sessionId: string; merchantId: string; providerToken: string }, TakenSession | undefined>(
    async (batch) => {
      const { rows } = await queryPrepared<TakenSession & { i: number }>(
        this.orm,
        'checkout_completion_take_batch',
        TAKE_SESSION_SQL,
        [
          JSON.stringify(batch.map((t, i) => ({ i, id: t.sessionId, merchant_id: t.merchantId, token: t.providerToken }))),
          this.opts.leaseSeconds,
          batch.map((t) => t.providerToken),
          batch.map((t) => t.sessionId),
        ],
      );
      return rowsByItem(batch.length, rows);
    },
    { keyOf: (t) => t.sessionId },
  );

  private async provision(s: TakenSession, providerToken: string): Promise<CompletionResult> {
    const customer = { email: s.email!, firstName: s.firstName!, lastName: s.lastName!, phone: s.phone ?? undefined };
    // The account (identity) and the enrolment (billing) depend on nothing but the session:
    // asked for at once, they cost the completion one wait instead of two.
    const [account, enrolled] = await Promise.all([
      this.backends.customers.EnsureCustomerAccount(customer).then(
        (a) => {
          this.fault('after-customer');
          return a;
        },
        // Details identity refuses (a session's email from a link made before links were validated).
        (e: unknown) => {
          if (e instanceof DomainError && e.code === 'validation_failed') return invalidCustomer(s, e);
          throw e;
        },
      ),
      this.enrol(s, customer, providerToken),
    ]);
    if ('status' in account) return account;
    if ('status' in enrolled) return enrolled;
    this.fault('after-enrolment');
    const { memberId, paymentMethodId, subscriptionId } = enrolled;
    const completedAt = new Date();
    const event = toOutboxJsonRow(0, {
      type: 'checkout.completed',
      merchantId: s.merchantId,
      occurredAt: completedAt,
      traceContext: injectTraceHeaders(),
      data: {
        sessionId: s.id,
        memberId,
        paymentMethodId,
        subscriptionId,
        planId: s.planId,
        customerAccountId: account.id,
        email: s.email,
        firstName: s.firstName,
        lastName: s.lastName,
        completedAt: completedAt.toISOString(),
      },
    });
    await this.finishes.submit({
      sessionId: s.id,
      customerAccountId: account.id,
      memberId,
      paymentMethodId,
      event,
    });
    // Completed by this statement or, when an attempt whose lease outlived it got there first, before it.
    return completed(s);
  }

  /**
   * The member, its payment method from the session's token and the subscription with the id
   * the session fixed, in one call to billing; or the session's failure when billing refuses the
   * token or the customer already has a live subscription to the plan.
   */
  private async enrol(s: TakenSession, customer: { email: string; firstName: string; lastName: string; phone?: string }, providerToken: string) {
    try {
      const { member, paymentMethod, subscription } = await this.backends.enrolments.Enrol({
        scope: scopeOfMerchant(s.merchantId),
        ...customer,
        providerToken,
        planId: s.planId,
        subscriptionId: s.subscriptionId,
        // Its subscription is this session's; concurrent enrolments of the email and plan take turns.
        enrolmentKey: s.id,
        // The visitor proved no claim to the methods of an existing member with the email they gave.
        ownMethodOnly: true,
      });
      return { memberId: member!.id, paymentMethodId: paymentMethod!.id, subscriptionId: subscription!.id };
    } catch (e) {
      if (e instanceof DomainError && e.code === 'validation_failed' && e.extensions.errors?.providerToken) {
        return failed(s, 'invalid_token', 'The payment provider does not accept this token for this customer.');
      }
      if (e instanceof DomainError && e.code === 'subscription_exists') return failed(s, 'subscription_exists', 'The customer already has a live subscription to this plan.');
      if (e instanceof DomainError && e.code === 'unprocessable') return failed(s, 'plan_inactive', 'The plan is no longer active.');
      // Another completion of the same email and plan is still enrolling after billing's wait: retry shortly.
      if (e instanceof DomainError && e.code === 'conflict') return { status: 'Pending', failureKind: '' };
      if (e instanceof DomainError && e.code === 'validation_failed') return invalidCustomer(s, e);
      throw e;
    }
  }

  /**
   * Sessions become Completed (their leases cleared) and `checkout.completed` is inserted only for
   * a session its statement completed, so exactly once: the finishes that arrive together are
   * one statement, two of one session never in the same one.
   */
  private readonly finishes = new Batcher<{ sessionId: string; customerAccountId: string; memberId: string; paymentMethodId: string; event: OutboxJsonRow }, void>(
    async (batch) => {
      await queryPrepared(
        this.orm,
        'checkout_completion_finish_batch',
        FINISH_SESSION_SQL,
        [
          JSON.stringify(batch.map((f) => ({ id: f.sessionId, customer_account_id: f.customerAccountId, member_id: f.memberId, payment_method_id: f.paymentMethodId, completed_at: f.event.occurred_at }))),
          JSON.stringify(batch.map((f, seq) => ({ ...f.event, seq, session_id: f.sessionId }))),
          batch.map((f) => f.sessionId),
        ],
      );
      return batch.map(() => undefined);
    },
    { keyOf: (f) => f.sessionId },
  );

  private async release(sessionId: string): Promise<void> {
    await queryPrepared(this.orm, 'checkout_completion_release', `update sessions set completion_lease_until = null where id = $1 and status = 'Open'`, [sessionId]);
  }
}
