import { z } from 'zod';
import {
  CUSTOMER_OPTIONAL_PROFILE_FIELDS,
  CustomerAccount,
  CustomerLoginRequest,
  CustomerSignInResult,
  CustomerSignupRequest,
  DomainError,
  ForgotPasswordRequest,
  PasswordResetToken,
  PathId,
  ResetPasswordRequest,
  UpdateCustomerProfileRequest,
  VerifyEmailRequest,
} from '@billing/contracts';
import type { CredentialFeed } from '../auth/credential-feed.js';
import type { Principal } from '../auth/principal.js';
import type { Backends } from '../backends/clients.js';
import { defineRoute, noContent, ok, type RouteSpec } from '../http/route.js';
import { orNull, present } from '../http/views.js';
import type { CustomerAccount__Output } from '@billing/proto-types/identity/v1/CustomerAccount';
import type { CustomerSignInResult__Output } from '@billing/proto-types/identity/v1/CustomerSignInResult';

/** The REST profile of identity's CustomerAccount message (absent optional fields are null). */
export function toCustomerAccount(a: CustomerAccount__Output): CustomerAccount {
  return {
    id: a.id,
    email: a.email,
    firstName: a.firstName,
    lastName: a.lastName,
    fullName: a.fullName,
    dateOfBirth: orNull(a.dateOfBirth),
    phone: orNull(a.phone),
    addressLine1: orNull(a.addressLine1),
    addressLine2: orNull(a.addressLine2),
    city: orNull(a.city),
    state: orNull(a.state),
    postCode: orNull(a.postCode),
    country: orNull(a.country),
    emailVerified: a.emailVerified,
    createdAt: a.createdAt,
  };
}

function toSignInResult(res: CustomerSignInResult__Output): CustomerSignInResult {
  const { id, email, fullName, emailVerified } = present(res.account, 'account');
  return { token: res.token, expiresAt: res.expiresAt, account: { id, email, fullName, emailVerified } };
}

/** Proto has no null: a null optional field is sent as absent. */
function withoutNulls<T extends object>(body: T): { [K in keyof T]: Exclude<T[K], null> } {
  return Object.fromEntries(Object.entries(body).filter(([, v]) => v !== null && v !== undefined)) as { [K in keyof T]: Exclude<T[K], null> };
}

function accountIdOf(principal: Principal): string {
  if (principal.kind !== 'customer') throw new DomainError('unauthenticated', 'A customer token is required.');
  return principal.accountId;
}

const IdParams = z.object({ id: PathId });

export function customerRoutes(backends: Backends, feed: CredentialFeed): RouteSpec[] {
  const customers = backends.identity.customers;
  /** Ends the account's tokens at this replica at once; the others learn it from the credential feed. */
  const applyRevocation = (change: { accountId: string; revoked: boolean; at: string }) =>
    feed.apply({ kind: 'customer', subjectId: change.accountId, revoked: change.revoked, at: change.at });

  return [
    defineRoute({
      method: 'POST',
      url: '/api/account/signup',
      tag: 'Customer accounts',
      summary: 'Sign up a customer (or claim the unclaimed account of this email)',
      description:
        'Creates a customer account and returns a customer token (one hour). When an invitation or a checkout already created an unclaimed account for the email, this claims it: sets the password and the whole profile from this body alone, so a contact field not given here is null, whatever the invitation or checkout stored (200). A claimed account for the email: 409. An unclaimed account that the platform suspended: 403 (type .../account-suspended), and it stays unclaimed. The email is stored and returned as sent and matched case-insensitively (a claim stores it as typed here). A verification link is emailed; emailVerified stays false until it is used (or a password reset with an emailed token).',
      auth: { anonymous: true },
      body: CustomerSignupRequest,
      responses: { 200: CustomerSignInResult, 400: null, 403: null, 409: null },
      handler: async ({ body }) => ok(toSignInResult(await customers.SignUpCustomer(withoutNulls(body), { deadlineMs: backends.passwordDeadlineMs }))),
    }),
    defineRoute({
      method: 'POST',
      url: '/api/account/login',
      tag: 'Customer accounts',
      summary: 'Sign in a customer',
      description:
        'A wrong password and an unknown email are the same 401. Five consecutive failures for one email (known or not) from one client lock it for that client for 15 minutes, doubling for each further lock (configurable): while locked, every login for it from that client answers 429 with Retry-After (seconds left), even with the right password. A correct password resets the count. A suspended account answers 403 (type .../account-suspended) when the password is right.',
      auth: { anonymous: true },
      body: CustomerLoginRequest,
      responses: { 200: CustomerSignInResult, 400: null, 401: null, 403: null, 429: null },
      handler: async ({ body, request }) => ok(toSignInResult(await customers.LoginCustomer({ ...body, client: request.ip }, { deadlineMs: backends.passwordDeadlineMs }))),
    }),
    defineRoute({
      method: 'GET',
      url: '/api/account/me',
      tag: 'Customer accounts',
      summary: 'Read the signed-in customer profile',
      auth: { customer: true },
      responses: { 200: CustomerAccount, 401: null },
      handler: async ({ principal }) => {
        const account = await customers.GetCustomerAccount({ id: accountIdOf(principal) }).catch((e: unknown) => {
          if (e instanceof DomainError && e.code === 'not_found') throw new DomainError('unauthenticated', 'The account no longer exists.');
          throw e;
        });
        if (account.suspended) throw new DomainError('unauthenticated', 'The account is suspended.');
        return ok(toCustomerAccount(account));
      },
    }),
    defineRoute({
      method: 'PUT',
      url: '/api/account/profile',
      tag: 'Customer accounts',
      summary: "Update the signed-in customer's profile",
      description:
        'firstName and lastName are required. Optional fields that are absent stay unchanged; null clears one; strings, an empty one too, are stored and returned as sent; dateOfBirth, when given, must be a real past date and cannot be cleared. A body accountId other than the signed-in account is 403.',
      auth: { customer: true },
      body: UpdateCustomerProfileRequest,
      responses: { 200: CustomerAccount, 400: null, 401: null, 403: null },
      handler: async ({ body, principal }) => {
        const accountId = accountIdOf(principal);
        if (body.accountId && body.accountId.toLowerCase() !== accountId.toLowerCase()) {
          throw new DomainError('forbidden', 'accountId is not the signed-in account.');
        }
        const cleared = CUSTOMER_OPTIONAL_PROFILE_FIELDS.filter((f) => body[f] === null);
        const { accountId: _ignored, ...fields } = body;
        const res = await customers.UpdateCustomerProfile({ ...withoutNulls(fields), accountId, cleared });
        return ok(toCustomerAccount(res));
      },
    }),
    defineRoute({
      method: 'POST',
      url: '/api/account/forgot-password',
      tag: 'Customer accounts',
      summary: 'Email a password-reset link',
      description:
        'Always 202, whether or not an account has the email, and answered before the account is looked up so the timing is the same too. When it has one, a link carrying a single-use token (valid one hour) is emailed.',
      auth: { anonymous: true },
      body: ForgotPasswordRequest,
      responses: { 202: null, 400: null },
      handler: async ({ body }) => {
        await customers.RequestPasswordReset(body);
        return { status: 202 };
      },
    }),
    defineRoute({
      method: 'POST',
      url: '/api/account/reset-password',
      tag: 'Customer accounts',
      summary: 'Set a new password with a reset token',
      description:
        'The token works once (also under concurrent use: exactly one succeeds) and for one hour; a used, expired or unknown token is 400 naming `token`. Success ends every existing token of the account, retires its other reset tokens and clears its failed-login lock; it claims an unclaimed account, keeping its profile. A token from the forgot-password email also sets emailVerified true (it proves control of the address); a support-desk token does not.',
      auth: { anonymous: true },
      body: ResetPasswordRequest,
      responses: { 204: null, 400: null },
      handler: async ({ body }) => {
        applyRevocation(await customers.ResetPassword(body, { deadlineMs: backends.passwordDeadlineMs }));
        return noContent();
      },
    }),
    defineRoute({
      method: 'POST',
      url: '/api/account/verify-email',
      tag: 'Customer accounts',
      summary: 'Confirm the email address with the token from the verification link',
      description: 'The token (emailed at sign-up) works once, within 24 hours; otherwise 400 naming `token`.',
      auth: { anonymous: true },
      body: VerifyEmailRequest,
      responses: { 204: null, 400: null },
      handler: async ({ body }) => {
        await customers.VerifyEmail(body);
        return noContent();
      },
    }),
    defineRoute({
      method: 'POST',
      url: '/api/admin/accounts/:id/password-reset',
      tag: 'Admin',
      summary: 'Issue a password-reset token for a customer (support desk)',
      description: 'The plaintext token is returned once (only its SHA-256 is stored); it is valid one hour, once, at POST /api/account/reset-password. Nothing is emailed, so a reset with it does not verify the email.',
      auth: { admin: true },
      params: IdParams,
      responses: { 200: PasswordResetToken, 404: null },
      handler: async ({ params }) => {
        const { token, expiresAt } = await customers.IssuePasswordReset({ id: params.id });
        return ok({ token, expiresAt });
      },
    }),
    defineRoute({
      method: 'POST',
      url: '/api/admin/accounts/:id/suspend',
      tag: 'Admin',
      summary: 'Suspend a customer account',
      description: "Idempotent. The account's tokens stop working on the next request (401) and login answers 403.",
      auth: { admin: true },
      params: IdParams,
      responses: { 204: null, 404: null },
      handler: async ({ params }) => {
        applyRevocation(await customers.SuspendCustomerAccount({ id: params.id }));
        return noContent();
      },
    }),
    defineRoute({
      method: 'POST',
      url: '/api/admin/accounts/:id/unsuspend',
      tag: 'Admin',
      summary: 'Lift the suspension of a customer account',
      description: 'Idempotent. The customer can sign in again; tokens issued before the suspension stay invalid.',
      auth: { admin: true },
      params: IdParams,
      responses: { 204: null, 404: null },
      handler: async ({ params }) => {
        await customers.UnsuspendCustomerAccount({ id: params.id });
        return noContent();
      },
    }),
  ];
}
