import { existsSync, readFileSync, rmSync } from 'node:fs';
import { LockMode, type MikroORM } from '@mikro-orm/postgresql';
import { DomainError, type FieldErrors } from '@billing/contracts';
import { queryRows, recordEvent, scopeOfMerchant, type Logger } from '@billing/service-runtime';
import type { CompletionResult__Output as CompletionResult } from '@billing/proto-types/checkout/v1/CompletionResult';
import type { CheckoutBackends } from '../backends.js';
import { BankToken } from '../sessions/bank-token.js';
import { CheckoutSession } from '../sessions/session.js';
import { findSession } from '../sessions/sessions.js';

export type CompletionStep = 'after-customer' | 'after-member' | 'after-payment-method' | 'after-subscription';

export interface CompletionOptions {
  leaseSeconds: number;
  /** Test-only fault: kill this process after the step named in the file (see config). */
  faultFile?: string;
  logger: Logger;
}

const completed = (s: CheckoutSession): CompletionResult => ({ status: 'Completed', returnUrl: s.returnUrl, failureKind: '' });
const failed = (s: CheckoutSession, kind: 'invalid_token' | 'subscription_exists', reason: string): CompletionResult => ({ status: 'Failed', returnUrl: s.returnUrl, failureReason: reason, failureKind: kind });

/**
 * Completes a checkout session: one business operation across identity and billing. Each step
 * is repeatable and keyed by what the session already fixes (the email, the token, the
 * subscription id chosen at session creation), so an attempt that died half way is finished by
 * the next one, which converges on the same account, member, payment method and subscription.
 * The session becomes Completed and `checkout.completed` is written to the outbox in one
 * transaction, under the row lock, once.
 */
export class SessionCompletion {
  constructor(
    private readonly orm: MikroORM,
    private readonly backends: CheckoutBackends,
    private readonly opts: CompletionOptions,
  ) {}

  async complete(merchantId: string, sessionId: string, providerToken: string): Promise<CompletionResult> {
    const em = this.orm.em.fork();
    const session = await findSession(em, merchantId, sessionId);
    if (session.isCompleted()) return completed(session);
    const token = providerToken ? await em.findOne(BankToken, { token: providerToken }) : null;
    if (!token || token.sessionId !== session.id) return failed(session, 'invalid_token', 'The provider token is unknown or was not captured for this checkout session.');
    const missing: FieldErrors = {};
    for (const f of ['email', 'firstName', 'lastName'] as const) if (!session[f]) missing[f] = ['Required before completing: send it with PATCH /api/Checkout/sessions/me/customer.'];
    if (Object.keys(missing).length) throw DomainError.validation(missing);

    if (!(await this.lease(session.id))) {
      const now = await this.orm.em.fork().findOneOrFail(CheckoutSession, { id: session.id });
      return now.isCompleted() ? completed(now) : { status: 'Pending', failureKind: '' };
    }
    try {
      return await this.provision(session, providerToken);
    } finally {
      await this.release(session.id);
    }
  }

  private async provision(s: CheckoutSession, providerToken: string): Promise<CompletionResult> {
    const customer = { email: s.email!, firstName: s.firstName!, lastName: s.lastName!, phone: s.phone ?? undefined };
    const account = await this.backends.customers.EnsureCustomerAccount(customer);
    this.fault('after-customer');
    const { member } = await this.backends.members.CreateMember({ scope: scopeOfMerchant(s.merchantId), ...customer });
    this.fault('after-member');
    let paymentMethodId: string;
    try {
      const added = await this.backends.paymentMethods.AddPaymentMethodFromToken({ scope: scopeOfMerchant(s.merchantId), memberId: member!.id, providerToken });
      paymentMethodId = added.paymentMethod!.id;
    } catch (e) {
      if (e instanceof DomainError && e.code === 'validation_failed') return failed(s, 'invalid_token', 'The payment provider does not accept this token for this customer.');
      throw e;
    }
    this.fault('after-payment-method');
    let subscriptionId: string;
    try {
      const sub = await this.backends.subscriptions.CreateSubscription({ scope: scopeOfMerchant(s.merchantId), memberId: member!.id, planId: s.planId, paymentMethodId, id: s.subscriptionId });
      subscriptionId = sub.id;
    } catch (e) {
      if (e instanceof DomainError && e.code === 'subscription_exists') return failed(s, 'subscription_exists', 'The customer already has a live subscription to this plan.');
      throw e;
    }
    this.fault('after-subscription');

    return this.orm.em.fork().transactional(async (em) => {
      const session = await em.findOneOrFail(CheckoutSession, { id: s.id }, { lockMode: LockMode.PESSIMISTIC_WRITE });
      if (session.isCompleted()) return completed(session);
      session.complete({ customerAccountId: account.id, memberId: member!.id, paymentMethodId });
      recordEvent(em, {
        type: 'checkout.completed',
        merchantId: session.merchantId,
        data: {
          sessionId: session.id,
          memberId: member!.id,
          paymentMethodId,
          subscriptionId,
          planId: session.planId,
          customerAccountId: account.id,
          email: session.email,
          firstName: session.firstName,
          lastName: session.lastName,
          completedAt: session.completedAt!.toISOString(),
        },
      });
      return completed(session);
    });
  }

  /** Takes the session for one completion attempt; false while another attempt holds it. */
  private async lease(sessionId: string): Promise<boolean> {
    // One atomic UPDATE … RETURNING decides between concurrent attempts (no read-then-write race).
    const rows = await queryRows(
      this.orm.em.fork(),
      `update sessions set completion_lease_until = now() + make_interval(secs => ?), updated_at = now()
        where id = ? and status = 'Open' and (completion_lease_until is null or completion_lease_until < now())
        returning id`,
      [this.opts.leaseSeconds, sessionId],
    );
    return rows.length === 1;
  }

  private async release(sessionId: string): Promise<void> {
    await this.orm.em.fork().getConnection().execute(`update sessions set completion_lease_until = null where id = ? and status = 'Open'`, [sessionId]);
  }

  private fault(step: CompletionStep): void {
    const file = this.opts.faultFile;
    if (!file || !existsSync(file) || readFileSync(file, 'utf8').trim() !== step) return;
    rmSync(file, { force: true });
    this.opts.logger.warn({ step }, 'injected fault: killing the checkout process half way through a completion');
    process.kill(process.pid, 'SIGKILL');
  }
}
