import { randomUUID } from 'node:crypto';
import { EntitySchema } from '@mikro-orm/postgresql';
import { DomainError } from '@billing/contracts';

/** The optional profile fields, each nullable. */
export interface CustomerContactDetails {
  phone: string | null;
  addressLine1: string | null;
  addressLine2: string | null;
  city: string | null;
  state: string | null;
  postCode: string | null;
  country: string | null;
}
export type OptionalProfileField = keyof CustomerContactDetails;
export const OPTIONAL_PROFILE_FIELDS: readonly OptionalProfileField[] = ['phone', 'addressLine1', 'addressLine2', 'city', 'state', 'postCode', 'country'];

export interface SignupProfile extends Partial<CustomerContactDetails> {
  firstName: string;
  lastName: string;
  dateOfBirth: string;
}

/**
 * A merchant's end customer. An account is *unclaimed* (no password) when an invitation or a
 * checkout created it for an email; signing up with that email, in any letter case, claims it.
 * A suspended account cannot sign in and its tokens are refused.
 */
export class CustomerAccount {
  id: string = randomUUID();
  /**
   * Exactly as sent: at signup, else as the invitation or checkout that created the account gave
   * it. Unique compared case-insensitively (a unique index on `lower(email)`; see `byEmail`).
   */
  email!: string;
  /** scrypt hash; null while unclaimed. */
  passwordHash: string | null = null;
  firstName!: string;
  lastName!: string;
  /** YYYY-MM-DD. */
  dateOfBirth: string | null = null;
  phone: string | null = null;
  addressLine1: string | null = null;
  addressLine2: string | null = null;
  city: string | null = null;
  state: string | null = null;
  postCode: string | null = null;
  country: string | null = null;
  emailVerified = false;
  termsAcceptedAt: Date | null = null;
  claimedAt: Date | null = null;
  suspendedAt: Date | null = null;
  createdAt: Date = new Date();
  updatedAt: Date = new Date();

  /** An account created for an email named by an invitation or a checkout; no password yet. */
  static unclaimed(props: { email: string; firstName: string; lastName: string; phone?: string | null }): CustomerAccount {
    return Object.assign(new CustomerAccount(), {
      email: props.email,
      firstName: props.firstName,
      lastName: props.lastName,
      phone: props.phone ?? null,
    });
  }

  static signUp(email: string, profile: SignupProfile, passwordHash: string, acceptedTerms: boolean): CustomerAccount {
    const account = Object.assign(new CustomerAccount(), { email, firstName: profile.firstName, lastName: profile.lastName });
    account.claim(email, profile, passwordHash, acceptedTerms);
    return account;
  }

  isClaimed(): boolean {
    return this.passwordHash !== null;
  }

  fullName(): string {
    return `${this.firstName} ${this.lastName}`;
  }

  isSuspended(): boolean {
    return this.suspendedAt !== null;
  }

  /**
   * Sets the password and the whole profile from the signup alone: a contact field it does not
   * give becomes null. The claimant has proved nothing yet (the email is not verified), so what
   * the invitation or checkout stored for this email (a phone the merchant typed) must not be
   * shown to them. `email` (this account's in some letter case) is the one the customer typed at
   * signup and replaces the one the invitation or checkout gave: the owner's spelling wins.
   */
  claim(email: string, profile: SignupProfile, passwordHash: string, acceptedTerms: boolean, now = new Date()): void {
    if (this.isClaimed()) throw new DomainError('conflict', 'An account already exists for this email.');
    this.email = email;
    this.passwordHash = passwordHash;
    this.claimedAt = now;
    this.firstName = profile.firstName;
    this.lastName = profile.lastName;
    this.dateOfBirth = profile.dateOfBirth;
    for (const f of OPTIONAL_PROFILE_FIELDS) this[f] = profile[f] ?? null;
    if (acceptedTerms) this.termsAcceptedAt = now;
    this.updatedAt = now;
  }

  /** Names are replaced; dateOfBirth and contact fields only when given (null clears a contact field). */
  updateProfile(change: { firstName: string; lastName: string; dateOfBirth?: string | null } & Partial<CustomerContactDetails>): void {
    this.firstName = change.firstName;
    this.lastName = change.lastName;
    if (change.dateOfBirth) this.dateOfBirth = change.dateOfBirth;
    for (const f of OPTIONAL_PROFILE_FIELDS) if (change[f] !== undefined) this[f] = change[f];
    this.updatedAt = new Date();
  }

  /**
   * A password reset also claims an unclaimed account, keeping its profile: the reset token was
   * either emailed to the account's address (its holder controls the email the merchant stored
   * those details for) or handed to the platform admin, who vouches for whom they give it to.
   * `emailProven` (the token was emailed) also verifies the email, the one way an account claimed
   * by a reset, or one whose verification link expired, can become verified.
   */
  setPassword(passwordHash: string, emailProven: boolean, now = new Date()): void {
    this.passwordHash = passwordHash;
    this.claimedAt ??= now;
    if (emailProven) this.emailVerified = true;
    this.updatedAt = now;
  }

  markEmailVerified(): void {
    if (this.emailVerified) return;
    this.emailVerified = true;
    this.updatedAt = new Date();
  }

  /** Returns whether this changed anything (suspending a suspended account keeps the original time). */
  suspend(now = new Date()): boolean {
    if (this.suspendedAt) return false;
    this.suspendedAt = now;
    this.updatedAt = now;
    return true;
  }

  unsuspend(now = new Date()): boolean {
    if (!this.suspendedAt) return false;
    this.suspendedAt = null;
    this.updatedAt = now;
    return true;
  }
}

export const CustomerAccountSchema = new EntitySchema<CustomerAccount>({
  class: CustomerAccount,
  tableName: 'customer_accounts',
  properties: {
    id: { type: 'uuid', primary: true },
    // Unique on lower(email), an expression index the migrations make.
    email: { type: 'string' },
    passwordHash: { type: 'text', nullable: true },
    firstName: { type: 'string' },
    lastName: { type: 'string' },
    dateOfBirth: { type: 'string', columnType: 'date', nullable: true },
    phone: { type: 'string', nullable: true },
    addressLine1: { type: 'string', nullable: true },
    addressLine2: { type: 'string', nullable: true },
    city: { type: 'string', nullable: true },
    state: { type: 'string', nullable: true },
    postCode: { type: 'string', nullable: true },
    country: { type: 'string', nullable: true },
    emailVerified: { type: 'boolean' },
    termsAcceptedAt: { type: 'Date', columnType: 'timestamptz', nullable: true },
    claimedAt: { type: 'Date', columnType: 'timestamptz', nullable: true },
    suspendedAt: { type: 'Date', columnType: 'timestamptz', nullable: true },
    createdAt: { type: 'Date', columnType: 'timestamptz' },
    updatedAt: { type: 'Date', columnType: 'timestamptz' },
  },
});
