import { createHash, randomBytes, randomUUID } from 'node:crypto';
import { EntitySchema } from '@mikro-orm/postgresql';
import { DomainError, type InvitationStatus } from '@billing/contracts';

/** SHA-256 (hex) of a plaintext invitation token: the only form the token is stored in. */
export function hashInvitationToken(token: string): string {
  return createHash('sha256').update(token, 'utf8').digest('hex');
}

/**
 * An invitation to onboard with a merchant. The link's token is 32 random bytes (base64url);
 * only its hash is kept. Once accepted it is bound to one customer account for good.
 */
export class Invitation {
  id: string = randomUUID();
  merchantId!: string;
  tokenHash!: string;
  firstName!: string;
  lastName!: string;
  email: string | null = null;
  phone: string | null = null;
  expiresAt!: Date;
  createdAt: Date = new Date();
  accountId: string | null = null;
  acceptedAt: Date | null = null;
  completedAt: Date | null = null;
  revokedAt: Date | null = null;
  memberId: string | null = null;
  subscriptionId: string | null = null;

  /** A new invitation and its plaintext token (returned to the merchant once, and sent in the link). */
  static issue(input: { merchantId: string; firstName: string; lastName: string; email: string | null; phone: string | null; expiresInDays: number }, now = new Date()): { invitation: Invitation; token: string } {
    const token = randomBytes(32).toString('base64url');
    const invitation = Object.assign(new Invitation(), {
      merchantId: input.merchantId,
      tokenHash: hashInvitationToken(token),
      firstName: input.firstName,
      lastName: input.lastName,
      email: input.email,
      phone: input.phone,
      createdAt: now,
      expiresAt: new Date(now.getTime() + input.expiresInDays * 86_400_000),
    });
    return { invitation, token };
  }

  status(now = new Date()): InvitationStatus {
    if (this.completedAt) return 'Completed';
    if (this.revokedAt) return 'Revoked';
    if (this.expiresAt.getTime() <= now.getTime()) return 'Expired';
    return this.acceptedAt ? 'Accepted' : 'Pending';
  }

  /** Refuses (gone) an invitation whose link no longer works: revoked, or expired before completing. */
  assertUsable(now = new Date()): void {
    const status = this.status(now);
    if (status === 'Revoked') throw new DomainError('gone', 'This invitation has been withdrawn.', { reason: 'Revoked' });
    if (status === 'Expired') throw new DomainError('gone', 'This invitation has expired.', { reason: 'Expired' });
  }

  /**
   * Binds the invitation to `accountId`. Accepting again by the same account changes nothing, and
   * answers as the link does now: a completed invitation as it is, an expired or revoked one gone.
   */
  accept(accountId: string, now = new Date()): void {
    if (this.accountId && this.accountId !== accountId) throw new DomainError('conflict', 'This invitation has been accepted by another account.');
    if (this.completedAt) return;
    this.assertUsable(now);
    if (this.accountId) return;
    this.accountId = accountId;
    this.acceptedAt = now;
  }

  /** Idempotent; a completed invitation cannot be withdrawn. */
  revoke(now = new Date()): void {
    if (this.completedAt) throw new DomainError('invalid_transition', 'A completed invitation cannot be revoked.');
    this.revokedAt ??= now;
  }

  complete(result: { memberId: string; subscriptionId: string }, now = new Date()): void {
    this.memberId = result.memberId;
    this.subscriptionId = result.subscriptionId;
    this.completedAt ??= now;
  }

  toMessage(now = new Date()) {
    const iso = (d: Date | null) => d?.toISOString();
    return {
      id: this.id,
      merchantId: this.merchantId,
      firstName: this.firstName,
      lastName: this.lastName,
      email: this.email ?? undefined,
      phone: this.phone ?? undefined,
      status: this.status(now),
      expiresAt: this.expiresAt.toISOString(),
      createdAt: this.createdAt.toISOString(),
      acceptedAt: iso(this.acceptedAt),
      completedAt: iso(this.completedAt),
      revokedAt: iso(this.revokedAt),
      memberId: this.memberId ?? undefined,
      subscriptionId: this.subscriptionId ?? undefined,
    };
  }
}

export const InvitationSchema = new EntitySchema<Invitation>({
  class: Invitation,
  tableName: 'invitations',
  properties: {
    id: { type: 'uuid', primary: true },
    merchantId: { type: 'uuid' },
    tokenHash: { type: 'string', columnType: 'char(64)' },
    firstName: { type: 'string' },
    lastName: { type: 'string' },
    email: { type: 'string', nullable: true },
    phone: { type: 'string', nullable: true },
    expiresAt: { type: 'Date', columnType: 'timestamptz' },
    createdAt: { type: 'Date', columnType: 'timestamptz' },
    accountId: { type: 'uuid', nullable: true },
    acceptedAt: { type: 'Date', columnType: 'timestamptz', nullable: true },
    completedAt: { type: 'Date', columnType: 'timestamptz', nullable: true },
    revokedAt: { type: 'Date', columnType: 'timestamptz', nullable: true },
    memberId: { type: 'uuid', nullable: true },
    subscriptionId: { type: 'uuid', nullable: true },
  },
});
