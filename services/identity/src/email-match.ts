import { emailInAnyCase } from '@billing/service-runtime';

// Emails are stored and returned exactly as sent, and matched case-insensitively: one address in
// any letter case is one customer account, one merchant user, one lock.

/** The filter of the row whose `email` is `email` in any letter case, served by the table's unique index on `lower(email)`. */
export function byEmail(email: string) {
  return emailInAnyCase(email);
}

/**
 * The key of state kept per email address (failed-login locks, reset-email counts): the email
 * lower-cased, as Postgres' `lower` does it for the ASCII the email schema allows.
 */
export function emailKey(email: string): string {
  return email.toLowerCase();
}
