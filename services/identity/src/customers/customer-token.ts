import { randomBytes } from 'node:crypto';
import { EntitySchema, type EntityManager } from '@mikro-orm/postgresql';
import { sha256Hex } from '@billing/service-runtime';

export type CustomerTokenPurpose = 'password_reset' | 'email_verification';

/**
 * How the plaintext reached its holder: `email`, in a link sent to the account's address (using it
 * proves control of that address); `handed_out`, in an answer to the platform admin (support
 * desk), which proves nothing about the address.
 */
export type CustomerTokenDelivery = 'email' | 'handed_out';

/**
 * A single-use token sent to a customer (password reset, email verification). The plaintext
 * (32 random bytes, base64url) exists only in the link or response that delivers it; the row
 * holds its SHA-256.
 */
export class CustomerToken {
  tokenHash!: string;
  accountId!: string;
  purpose!: CustomerTokenPurpose;
  delivery!: CustomerTokenDelivery;
  expiresAt!: Date;
  usedAt: Date | null = null;
  createdAt: Date = new Date();

  /** A fresh token; persist `entity`, hand out `token`. */
  static mint(accountId: string, purpose: CustomerTokenPurpose, delivery: CustomerTokenDelivery, ttlSeconds: number, now = new Date()) {
    const token = randomBytes(32).toString('base64url');
    const entity = Object.assign(new CustomerToken(), {
      tokenHash: sha256Hex(token),
      accountId,
      purpose,
      delivery,
      expiresAt: new Date(now.getTime() + ttlSeconds * 1000),
      createdAt: now,
    });
    return { token, entity };
  }
}

/** Whether `token` is currently usable, without using it (a cheap pre-check before slow work). */
export async function isTokenUsable(em: EntityManager, token: string, purpose: CustomerTokenPurpose): Promise<boolean> {
  const rows = await em.execute<{ ok: number }[]>(
    `select 1 as ok from customer_tokens where token_hash = ? and purpose = ? and used_at is null and expires_at > now()`,
    [sha256Hex(token), purpose],
  );
  return rows.length > 0;
}

/** A token just used: its account and how it had been delivered. */
export interface ConsumedToken {
  accountId: string;
  delivery: CustomerTokenDelivery;
}

/**
 * Uses `token` once and returns its account and delivery, or undefined when it is unknown,
 * expired or already used. One atomic statement: of two concurrent uses exactly one gets the
 * account (the second waits on the row lock, then finds `used_at` set).
 */
export async function consumeToken(em: EntityManager, token: string, purpose: CustomerTokenPurpose): Promise<ConsumedToken | undefined> {
  const rows = await em.execute<{ account_id: string; delivery: CustomerTokenDelivery }[]>(
    `update customer_tokens set used_at = now()
      where token_hash = ? and purpose = ? and used_at is null and expires_at > now()
      returning account_id, delivery`,
    [sha256Hex(token), purpose],
  );
  const row = rows[0];
  return row && { accountId: row.account_id, delivery: row.delivery };
}

/** Ends every outstanding token of `purpose` for the account (after a password change, older reset links stop working). */
export async function retireTokens(em: EntityManager, accountId: string, purpose: CustomerTokenPurpose): Promise<void> {
  await em.execute(`update customer_tokens set used_at = now() where account_id = ? and purpose = ? and used_at is null`, [accountId, purpose]);
}

export const CustomerTokenSchema = new EntitySchema<CustomerToken>({
  class: CustomerToken,
  tableName: 'customer_tokens',
  properties: {
    tokenHash: { type: 'string', primary: true },
    accountId: { type: 'uuid' },
    purpose: { type: 'string' },
    delivery: { type: 'string' },
    expiresAt: { type: 'Date', columnType: 'timestamptz' },
    usedAt: { type: 'Date', columnType: 'timestamptz', nullable: true },
    createdAt: { type: 'Date', columnType: 'timestamptz' },
  },
});
