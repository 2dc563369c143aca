import { LockMode, UniqueConstraintViolationException, type EntityManager, type MikroORM } from '@mikro-orm/postgresql';
import { z } from 'zod';
import {
  CUSTOMER_TOKEN_TTL_SECONDS,
  CustomerLoginRequest,
  CustomerSignupRequest,
  DomainError,
  EMAIL_VERIFICATION_TTL_SECONDS,
  Email,
  ForgotPasswordRequest,
  isUuidText,
  PASSWORD_RESET_TTL_SECONDS,
  parseOrThrow,
  ResetPasswordRequest,
  UpdateCustomerProfileRequest,
  VerifyEmailRequest,
} from '@billing/contracts';
import { Batcher, deliveryFailureForLog, type DeliveryChannels, type Logger, type ServiceImpl } from '@billing/service-runtime';
import { CredentialChange } from '../credential-changes/credential-change.js';
import type { PasswordHasher } from '../passwords/password-hasher.js';
import type { TokenIssuer } from '../signing-keys/token-issuer.js';
import { byEmail } from '../email-match.js';
import { CustomerAccount, OPTIONAL_PROFILE_FIELDS, type OptionalProfileField } from './customer-account.js';
import { ensureAccounts, type EnsuredAccount } from './ensure-accounts.js';
import { emailVerificationEmail, passwordResetEmail } from './customer-mail.js';
import { consumeToken, CustomerToken, isTokenUsable, retireTokens } from './customer-token.js';
import type { LoginLockout } from '../passwords/login-lockout.js';
import type { ResetEmailThrottle } from './reset-email-throttle.js';

export interface CustomersDeps {
  orm: MikroORM;
  hasher: PasswordHasher;
  issuer: TokenIssuer;
  lockout: LoginLockout;
  resetEmails: ResetEmailThrottle;
  channels: DeliveryChannels;
  /** Base of the links in customer emails. */
  publicBaseUrl: string;
  logger: Logger;
}

export function toCustomerAccountMessage(a: CustomerAccount) {
  const optional = (v: string | null) => v ?? undefined;
  return {
    id: a.id,
    email: a.email,
    firstName: a.firstName,
    lastName: a.lastName,
    fullName: a.fullName(),
    dateOfBirth: optional(a.dateOfBirth),
    phone: optional(a.phone),
    addressLine1: optional(a.addressLine1),
    addressLine2: optional(a.addressLine2),
    city: optional(a.city),
    state: optional(a.state),
    postCode: optional(a.postCode),
    country: optional(a.country),
    emailVerified: a.emailVerified,
    createdAt: a.createdAt.toISOString(),
    claimed: a.isClaimed(),
    suspended: a.isSuspended(),
  };
}

const EnsureCustomerAccountInput = z.object({
  email: Email,
  firstName: z.string().max(100).regex(/\S/),
  lastName: z.string().max(100).regex(/\S/),
  phone: z.string().max(50).optional(),
});

const invalidToken = () => DomainError.field('token', 'The token is invalid, expired or already used.');

async function findAccount(em: EntityManager, id: string, lock = false): Promise<CustomerAccount> {
  const account = isUuidText(id) ? await em.findOne(CustomerAccount, { id }, lock ? { lockMode: LockMode.PESSIMISTIC_WRITE } : {}) : null;
  if (!account) throw new DomainError('not_found', 'Customer account not found.');
  return account;
}

export function customersGrpc(deps: CustomersDeps): ServiceImpl<'identity.v1.Customers'> {
  const { orm, hasher, issuer, lockout, resetEmails, channels, publicBaseUrl, logger } = deps;

  /** EnsureCustomerAccount's requests that arrive together: one prepared statement (`ensureAccounts`). */
  const ensured = new Batcher<CustomerAccount, EnsuredAccount>((wanted) => ensureAccounts(orm, wanted));

  /**
   * GetCustomerAccount's reads that arrive together (a gathered call from checkout, whose
   * completions each read their customer's account): one query for the batch, not one each.
   */
  const accounts = new Batcher<string, CustomerAccount | undefined>(async (ids) => {
    const found = await orm.em.fork().find(CustomerAccount, { id: { $in: [...new Set(ids)] } });
    const byId = new Map(found.map((a) => [a.id, a]));
    return ids.map((id) => byId.get(id));
  });

  /**
   * Delivery never fails the request that caused it; a lost email is logged by the sender's name
   * and failure code only, never its content or the error's text (a mail server's reply quotes
   * the address).
   */
  const deliver = (what: string, accountId: string, send: () => Promise<void>) =>
    void send().catch((e) => logger.error({ delivery: deliveryFailureForLog(e), accountId }, `could not send the ${what} email`));

  const signIn = async (account: CustomerAccount) => {
    const { token, expiresAt } = await issuer.issue('customer', account.id, { iat_ms: Date.now() }, CUSTOMER_TOKEN_TTL_SECONDS);
    return { token, expiresAt: expiresAt.toISOString(), account: toCustomerAccountMessage(account) };
  };

  const sendPasswordReset = async (email: string) => {
    const em = orm.em.fork();
    const account = await em.findOne(CustomerAccount, byEmail(email));
    if (!account) return;
    if (!(await resetEmails.admit(em, email))) {
      logger.info({ accountId: account.id }, 'password-reset email not sent: hourly limit for this email reached');
      return;
    }
    const { token, entity } = CustomerToken.mint(account.id, 'password_reset', 'email', PASSWORD_RESET_TTL_SECONDS);
    await em.persistAndFlush(entity);
    deliver('password-reset', account.id, () => channels.email.send(passwordResetEmail(account.email, token, publicBaseUrl)));
  };

  return {
    SignUpCustomer: async (req) => {
      const input = parseOrThrow(CustomerSignupRequest, req);
      const { email } = input;
      const passwordHash = await hasher.hash(input.password);
      let verification: string;
      let account: CustomerAccount;
      let signedIn: Awaited<ReturnType<typeof signIn>>;
      try {
        ({ account, verification, signedIn } = await orm.em.fork().transactional(async (em) => {
          let account = await em.findOne(CustomerAccount, byEmail(email), { lockMode: LockMode.PESSIMISTIC_WRITE });
          if (account) {
            // A suspended account (an unclaimed one too: the platform may suspend the account a
            // checkout or invitation created) gets no token, as at login; it stays unclaimed.
            if (!account.isClaimed() && account.isSuspended()) throw new DomainError('account_suspended', 'This account is suspended.');
            account.claim(email, input, passwordHash, input.acceptedTerms === true);
          } else em.persist((account = CustomerAccount.signUp(email, input, passwordHash, input.acceptedTerms === true)));
          // The token row references the account: the account's insert must come first.
          await em.flush();
          const { token, entity } = CustomerToken.mint(account.id, 'email_verification', 'email', EMAIL_VERIFICATION_TTL_SECONDS);
          em.persist(entity);
          // Issued while the row is locked: a suspension waiting for it then revokes this token.
          return { account, verification: token, signedIn: await signIn(account) };
        }));
      } catch (e) {
        // Two sign-ups for a new email at once: the loser finds the winner's claimed account.
        if (e instanceof UniqueConstraintViolationException) throw new DomainError('conflict', 'An account already exists for this email.');
        throw e;
      }
      deliver('verification', account.id, () => channels.email.send(emailVerificationEmail(account.email, account.firstName, verification, publicBaseUrl)));
      return signedIn;
    },

    LoginCustomer: async (req) => {
      const input = parseOrThrow(CustomerLoginRequest, req);
      const client = req.client;
      const { email } = input;
      const em = orm.em.fork();
      const locked = (seconds: number) =>
        new DomainError('account_locked', `Too many failed sign-ins; try again in ${seconds} second(s).`, { retryAfterSeconds: seconds });

      const lockedFor = await lockout.secondsLocked(em, email, client);
      if (lockedFor) throw locked(lockedFor);
      const account = await em.findOne(CustomerAccount, byEmail(email));
      // An unknown email and an unclaimed account cost the same time as a wrong password.
      const ok = account?.passwordHash ? await hasher.verify(input.password, account.passwordHash) : await hasher.verifyAgainstNothing(input.password);
      if (!account || !ok) {
        const nowLocked = await lockout.recordFailure(em, email, client);
        if (nowLocked) throw locked(nowLocked);
        throw new DomainError('unauthenticated', 'Invalid email or password.');
      }
      const stillLocked = await lockout.recordSuccess(em, email, client);
      if (stillLocked) throw locked(stillLocked);
      // The password check takes a good fraction of a second, and the account may have been
      // suspended or its password reset meanwhile: that change revoked only the tokens issued
      // before it, so a token for the row read above would outlive it. The token is issued from
      // the row as it is now, held (FOR SHARE) while its iat is taken: a change either committed
      // first (and is seen here) or waits, and then revokes this token too.
      return orm.em.fork().transactional(async (tx) => {
        const current = await tx.findOne(CustomerAccount, { id: account.id }, { lockMode: LockMode.PESSIMISTIC_READ });
        if (!current || current.passwordHash !== account.passwordHash) throw new DomainError('unauthenticated', 'Invalid email or password.');
        if (current.isSuspended()) throw new DomainError('account_suspended', 'This account is suspended.');
        return signIn(current);
      });
    },

    GetCustomerAccount: async (req) => {
      const account = isUuidText(req.id) ? await accounts.submit(req.id.toLowerCase()) : undefined;
      if (!account) throw new DomainError('not_found', 'Customer account not found.');
      return toCustomerAccountMessage(account);
    },

    UpdateCustomerProfile: async (req) => {
      const cleared = new Set(req.cleared.filter((f): f is OptionalProfileField => (OPTIONAL_PROFILE_FIELDS as readonly string[]).includes(f)));
      const body = { ...req, accountId: undefined, cleared: undefined } as Record<string, unknown>;
      for (const f of cleared) body[f] = null;
      const input = parseOrThrow(UpdateCustomerProfileRequest, body);
      return orm.em.fork().transactional(async (em) => {
        const account = await findAccount(em, req.accountId, true);
        if (account.isSuspended()) throw new DomainError('unauthenticated', 'This account is suspended.');
        account.updateProfile(input);
        return toCustomerAccountMessage(account);
      });
    },

    RequestPasswordReset: async (req) => {
      const { email } = parseOrThrow(ForgotPasswordRequest, req);
      // Answer before looking anything up, so the answer and its timing are the same for every email.
      setImmediate(() => void sendPasswordReset(email).catch((e) => logger.error({ err: e }, 'could not prepare a password-reset email')));
      return {};
    },

    IssuePasswordReset: async (req) => {
      const em = orm.em.fork();
      const account = await findAccount(em, req.id);
      // Handed to the admin, not emailed: using it says nothing about who controls the address.
      const { token, entity } = CustomerToken.mint(account.id, 'password_reset', 'handed_out', PASSWORD_RESET_TTL_SECONDS);
      await em.persistAndFlush(entity);
      return { token, expiresAt: entity.expiresAt.toISOString() };
    },

    ResetPassword: async (req) => {
      const input = parseOrThrow(ResetPasswordRequest, req);
      // Spend the hashing time only on a token that can work; the use itself is atomic below.
      if (!(await isTokenUsable(orm.em.fork(), input.token, 'password_reset'))) throw invalidToken();
      const passwordHash = await hasher.hash(input.newPassword);
      return orm.em.fork().transactional(async (em) => {
        const used = await consumeToken(em, input.token, 'password_reset');
        if (!used) throw invalidToken();
        const account = await findAccount(em, used.accountId, true);
        account.setPassword(passwordHash, used.delivery === 'email');
        await retireTokens(em, account.id, 'password_reset');
        await lockout.clear(em, account.email);
        // A new password ends every session of the old one.
        const change = CredentialChange.of('customer', account.id, true);
        em.persist(change);
        return { accountId: account.id, revoked: true, at: change.at.toISOString() };
      });
    },

    VerifyEmail: async (req) => {
      const input = parseOrThrow(VerifyEmailRequest, req);
      await orm.em.fork().transactional(async (em) => {
        const used = await consumeToken(em, input.token, 'email_verification');
        if (!used) throw invalidToken();
        (await findAccount(em, used.accountId, true)).markEmailVerified();
      });
      return {};
    },

    SuspendCustomerAccount: async (req) =>
      orm.em.fork().transactional(async (em) => {
        const account = await findAccount(em, req.id, true);
        if (account.suspend()) em.persist(CredentialChange.of('customer', account.id, true));
        return { accountId: account.id, revoked: true, at: account.suspendedAt!.toISOString() };
      }),

    UnsuspendCustomerAccount: async (req) =>
      orm.em.fork().transactional(async (em) => {
        const account = await findAccount(em, req.id, true);
        const now = new Date();
        if (account.unsuspend(now)) em.persist(CredentialChange.of('customer', account.id, false));
        return { accountId: account.id, revoked: false, at: now.toISOString() };
      }),

    EnsureCustomerAccount: async (req) => {
      const input = parseOrThrow(EnsureCustomerAccountInput, req);
      return ensured.submit(CustomerAccount.unclaimed({ ...input, phone: input.phone || null }));
    },
  };
}
