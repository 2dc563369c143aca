import { randomUUID } from 'node:crypto';
import { EntitySchema } from '@mikro-orm/postgresql';
import { DomainError } from '@billing/contracts';

export type SessionStatus = 'Open' | 'Completed';

/** What completion provisioned, recorded once with the `checkout.completed` event. */
export interface CompletionFacts {
  customerAccountId: string;
  memberId: string;
  paymentMethodId: string;
}

/**
 * A checkout session: one resolved deep link (its merchant, plan, nonce and return URL), the
 * customer details entered so far, and, once completed, what completion provisioned. The
 * subscription id is chosen when the session is created, so every completion attempt asks
 * billing for the same subscription and a re-run converges on it.
 */
export class CheckoutSession {
  id: string = randomUUID();
  merchantId!: string;
  apiKeyId!: string;
  planId!: string;
  nonce!: string;
  /** SHA-256 hex of `d`: a replay of the same link matches it, a different link with the nonce does not. */
  linkHash!: string;
  returnUrl!: string;
  email: string | null = null;
  firstName: string | null = null;
  lastName: string | null = null;
  phone: string | null = null;
  status: SessionStatus = 'Open';
  completionLeaseUntil: Date | null = null;
  subscriptionId: string = randomUUID();
  customerAccountId: string | null = null;
  memberId: string | null = null;
  paymentMethodId: string | null = null;
  completedAt: Date | null = null;
  createdAt: Date = new Date();
  updatedAt: Date = new Date();

  isCompleted(): boolean {
    return this.status === 'Completed';
  }

  /**
   * Customer details may change until the session completes; an absent phone stays as it is.
   * Not while a completion holds the session: it provisions the details it took, so a change
   * then would be answered 204 and never reach the member (the completed session would show
   * details its member, subscription and `checkout.completed` do not have).
   */
  updateCustomer(c: { email: string; firstName: string; lastName: string; phone?: string | null }, now = new Date()): void {
    this.refuseWhenCompleted();
    if (this.completionLeaseUntil && this.completionLeaseUntil > now) throw new DomainError('conflict', 'The checkout session is being completed; its customer details cannot change now.');
    Object.assign(this, c, { updatedAt: now });
  }

  refuseWhenCompleted(): void {
    if (this.isCompleted()) throw new DomainError('conflict', 'The checkout session is already completed.');
  }

  complete(facts: CompletionFacts, now = new Date()): void {
    this.refuseWhenCompleted();
    Object.assign(this, facts, { status: 'Completed', completedAt: now, completionLeaseUntil: null, updatedAt: now });
  }
}

export const CheckoutSessionSchema = new EntitySchema<CheckoutSession>({
  class: CheckoutSession,
  tableName: 'sessions',
  properties: {
    id: { type: 'uuid', primary: true },
    merchantId: { type: 'uuid' },
    apiKeyId: { type: 'uuid' },
    planId: { type: 'uuid' },
    nonce: { type: 'string' },
    linkHash: { type: 'string' },
    returnUrl: { type: 'text' },
    email: { type: 'string', nullable: true },
    firstName: { type: 'string', nullable: true },
    lastName: { type: 'string', nullable: true },
    phone: { type: 'string', nullable: true },
    status: { type: 'string' },
    completionLeaseUntil: { type: 'Date', columnType: 'timestamptz', nullable: true },
    subscriptionId: { type: 'uuid' },
    customerAccountId: { type: 'uuid', nullable: true },
    memberId: { type: 'uuid', nullable: true },
    paymentMethodId: { type: 'uuid', nullable: true },
    completedAt: { type: 'Date', columnType: 'timestamptz', nullable: true },
    createdAt: { type: 'Date', columnType: 'timestamptz' },
    updatedAt: { type: 'Date', columnType: 'timestamptz' },
  },
});
