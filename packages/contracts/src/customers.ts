import { z } from 'zod';
import { DateTime, nonBlankPassword, required, Uuid } from './common.js';

/** Customer-scope bearer tokens live one hour. */
export const CUSTOMER_TOKEN_TTL_SECONDS = 3600;
/** Password-reset tokens (forgot-password link or support desk) are valid one hour, once. */
export const PASSWORD_RESET_TTL_SECONDS = 3600;
/** Email-verification links are valid 24 hours, once. */
export const EMAIL_VERIFICATION_TTL_SECONDS = 24 * 3600;

/** Earliest accepted date of birth. */
export const MIN_DATE_OF_BIRTH = '1900-01-01';

/** A required string (stored as sent) with a non-whitespace character, of at most `max` characters. */
const RequiredText = (max: number) =>
  z.string(required()).regex(/\S/, 'Required.').max(max, `Must be at most ${max} characters.`);

/** An optional string, stored as sent (an empty string too); null or absent means not given. */
const OptionalText = (max: number) => z.string('Must be a string.').max(max, `Must be at most ${max} characters.`).nullish();

/** Why `s` is not an acceptable date of birth, or undefined when it is. */
export function dateOfBirthProblem(s: string, today = new Date().toISOString().slice(0, 10)): string | undefined {
  const m = /^(\d{4})-(\d{2})-(\d{2})$/.exec(s);
  if (!m) return 'Must be a date in the form YYYY-MM-DD.';
  const [y, mo, d] = [Number(m[1]), Number(m[2]), Number(m[3])];
  const date = new Date(Date.UTC(y, mo - 1, d));
  if (date.getUTCFullYear() !== y || date.getUTCMonth() !== mo - 1 || date.getUTCDate() !== d) return 'Must be a real calendar date.';
  if (s < MIN_DATE_OF_BIRTH) return `Must be on or after ${MIN_DATE_OF_BIRTH}.`;
  if (s >= today) return 'Must be in the past.';
  return undefined;
}

/** `YYYY-MM-DD`, a real calendar date, strictly before today (UTC), not before 1900-01-01. */
export const DateOfBirth = z
  .string(required('date string'))
  .superRefine((s, ctx) => {
    const problem = dateOfBirthProblem(s);
    if (problem) ctx.addIssue({ code: 'custom', message: problem });
  })
  .meta({ format: 'date', description: 'YYYY-MM-DD, a real calendar date in the past.' });

const ProfileFields = {
  phone: OptionalText(50),
  addressLine1: OptionalText(200),
  addressLine2: OptionalText(200),
  city: OptionalText(100),
  state: OptionalText(100),
  postCode: OptionalText(20),
  country: OptionalText(100),
};
/** Optional profile fields, in the order of the full profile. */
export const CUSTOMER_OPTIONAL_PROFILE_FIELDS = Object.keys(ProfileFields) as (keyof typeof ProfileFields)[];

const RequiredEmail = z
  .email({ error: (issue) => (issue.input === undefined || issue.input === null ? 'Required.' : 'Must be a valid email address.') })
  .max(256, 'Must be at most 256 characters.');
const NewPassword = nonBlankPassword(z.string(required()).min(8, 'Must be at least 8 characters.').max(128, 'Must be at most 128 characters.'));

export const CustomerSignupRequest = z
  .object({
    email: RequiredEmail,
    password: NewPassword,
    firstName: RequiredText(100),
    lastName: RequiredText(100),
    dateOfBirth: DateOfBirth,
    ...ProfileFields,
    acceptedTerms: z.boolean('Must be a boolean.').nullish(),
  })
  .meta({ id: 'CustomerSignupRequest' });
export type CustomerSignupRequest = z.infer<typeof CustomerSignupRequest>;

export const CustomerLoginRequest = z
  .object({
    email: RequiredEmail,
    password: nonBlankPassword(z.string(required()).min(1, 'Required.').max(128, 'Must be at most 128 characters.')),
  })
  .meta({ id: 'CustomerLoginRequest' });
export type CustomerLoginRequest = z.infer<typeof CustomerLoginRequest>;

/**
 * `accountId`, when present, must be the signed-in account. Absent optional fields are left
 * unchanged; null clears one (an empty string is stored as sent). dateOfBirth cannot be cleared.
 */
export const UpdateCustomerProfileRequest = z
  .object({
    accountId: Uuid.nullish(),
    firstName: RequiredText(100),
    lastName: RequiredText(100),
    dateOfBirth: DateOfBirth.nullish(),
    ...ProfileFields,
  })
  .meta({ id: 'UpdateCustomerProfileRequest' });
export type UpdateCustomerProfileRequest = z.infer<typeof UpdateCustomerProfileRequest>;

export const ForgotPasswordRequest = z.object({ email: RequiredEmail }).meta({ id: 'ForgotPasswordRequest' });
export type ForgotPasswordRequest = z.infer<typeof ForgotPasswordRequest>;

const OneTimeToken = z.string(required()).min(1, 'Required.').max(512, 'Must be at most 512 characters.');

export const ResetPasswordRequest = z
  .object({ token: OneTimeToken, newPassword: NewPassword })
  .meta({ id: 'ResetPasswordRequest' });
export type ResetPasswordRequest = z.infer<typeof ResetPasswordRequest>;

export const VerifyEmailRequest = z.object({ token: OneTimeToken }).meta({ id: 'VerifyEmailRequest' });
export type VerifyEmailRequest = z.infer<typeof VerifyEmailRequest>;

/** The full customer account profile. */
export const CustomerAccount = z
  .object({
    id: Uuid,
    email: z.string(),
    firstName: z.string(),
    lastName: z.string(),
    fullName: z.string(),
    dateOfBirth: z.string().nullable(),
    phone: z.string().nullable(),
    addressLine1: z.string().nullable(),
    addressLine2: z.string().nullable(),
    city: z.string().nullable(),
    state: z.string().nullable(),
    postCode: z.string().nullable(),
    country: z.string().nullable(),
    emailVerified: z.boolean(),
    createdAt: DateTime,
  })
  .meta({ id: 'CustomerAccount' });
export type CustomerAccount = z.infer<typeof CustomerAccount>;

export const CustomerAccountSummary = z
  .object({ id: Uuid, email: z.string(), fullName: z.string(), emailVerified: z.boolean() })
  .meta({ id: 'CustomerAccountSummary' });
export type CustomerAccountSummary = z.infer<typeof CustomerAccountSummary>;

export const CustomerSignInResult = z
  .object({ token: z.string(), expiresAt: DateTime, account: CustomerAccountSummary })
  .meta({ id: 'CustomerSignInResult' });
export type CustomerSignInResult = z.infer<typeof CustomerSignInResult>;

/** Support-desk reset: the plaintext token is shown once; only its SHA-256 is stored. */
export const PasswordResetToken = z.object({ token: z.string(), expiresAt: DateTime }).meta({ id: 'PasswordResetToken' });
export type PasswordResetToken = z.infer<typeof PasswordResetToken>;
