import { LockMode, type EntityManager, type MikroORM } from '@mikro-orm/postgresql';
import { DomainError, isUuidText, type FieldErrors } from '@billing/contracts';
import { scopeOfMerchant } from '@billing/service-runtime';
import type { CheckoutSession__Output as SessionView } from '@billing/proto-types/checkout/v1/CheckoutSession';
import type { CheckoutBackends } from '../backends.js';
import { BankToken } from './bank-token.js';
import { CheckoutSession } from './session.js';

/** BSB: 6 digits, optionally with a hyphen after the third (contract §6). */
export const BSB_PATTERN = /^\d{3}-?\d{3}$/;
/** Account number: 5 to 9 digits. */
export const ACCOUNT_NUMBER_PATTERN = /^\d{5,9}$/;

/** A session of the merchant; another merchant's, or an unknown id, is not found. */
export async function findSession(em: EntityManager, merchantId: string, sessionId: string, opts: { lock?: boolean } = {}): Promise<CheckoutSession> {
  const session = isUuidText(sessionId) ? await em.findOne(CheckoutSession, { id: sessionId.toLowerCase(), merchantId }, opts.lock ? { lockMode: LockMode.PESSIMISTIC_WRITE } : {}) : null;
  if (!session) throw new DomainError('not_found', 'Checkout session not found.');
  return session;
}

/** Field errors of bank details, empty when they are acceptable. Never echoes the account number. */
export function bankDetailsErrors(d: { accountName: string; bsb: string; accountNumber: string }): FieldErrors {
  const errors: FieldErrors = {};
  if (!d.accountName || !d.accountName.trim()) errors.accountName = ['Required.'];
  // Counted in characters (code points), as every other length limit: a name of 200 emoji is 200 characters.
  else if ([...d.accountName].length > 200) errors.accountName = ['Must be at most 200 characters.'];
  if (!BSB_PATTERN.test(d.bsb ?? '')) errors.bsb = ['Must be 6 digits, e.g. 062-000.'];
  if (!ACCOUNT_NUMBER_PATTERN.test(d.accountNumber ?? '')) errors.accountNumber = ['Must be 5 to 9 digits.'];
  return errors;
}

/** Reading a session for its page, changing its customer, capturing its bank account. */
export class Sessions {
  constructor(
    private readonly orm: MikroORM,
    private readonly backends: CheckoutBackends,
  ) {}

  async view(merchantId: string, sessionId: string): Promise<SessionView> {
    const s = await findSession(this.orm.em.fork(), merchantId, sessionId);
    const [merchant, plan] = await Promise.all([this.backends.merchants.GetMerchant({ scope: scopeOfMerchant(s.merchantId), id: s.merchantId }), this.backends.plans.GetPlan({ scope: scopeOfMerchant(s.merchantId), id: s.planId })]);
    return {
      sessionId: s.id,
      merchantName: merchant.name,
      plan: { name: plan.name, amountMinor: plan.amountMinor, currency: plan.currency, interval: plan.interval, intervalCount: plan.intervalCount },
      customer: { email: s.email ?? undefined, firstName: s.firstName ?? undefined, lastName: s.lastName ?? undefined, phone: s.phone ?? undefined },
      status: s.status,
      returnUrl: s.returnUrl,
    };
  }

  async updateCustomer(merchantId: string, sessionId: string, c: { email: string; firstName: string; lastName: string; phone?: string | null }): Promise<void> {
    await this.orm.em.fork().transactional(async (em) => {
      // Locked: a completion taking the session's lease meanwhile either waits for this change
      // (and provisions it) or has taken it first (and this change is refused).
      const s = await findSession(em, merchantId, sessionId, { lock: true });
      s.updateCustomer(c);
    });
  }

  /** Tokenises at the merchant's provider and keeps only the token, BSB, account name and last 4. */
  async captureBank(merchantId: string, sessionId: string, details: { accountName: string; bsb: string; accountNumber: string }): Promise<string> {
    const em = this.orm.em.fork();
    const s = await findSession(em, merchantId, sessionId);
    s.refuseWhenCompleted();
    const errors = bankDetailsErrors(details);
    if (Object.keys(errors).length) throw DomainError.validation(errors);
    const t = await this.backends.providerTokens.TokeniseBankAccount({ scope: scopeOfMerchant(s.merchantId), ...details });
    const token = Object.assign(new BankToken(), { token: t.token, sessionId: s.id, merchantId: s.merchantId, accountName: t.accountName, bsb: t.bsb, last4: t.last4 });
    await em.persist(token).flush();
    return token.token;
  }
}
