import { Invitation } from './invitation.js';

/** An `invitations` row as jsonb (`to_jsonb`, or the document an insert reads): instants in ISO 8601, which keeps their milliseconds. */
export interface InvitationRow {
  id: string;
  merchant_id: string;
  token_hash: string;
  first_name: string;
  last_name: string;
  email: string | null;
  phone: string | null;
  expires_at: string;
  created_at: string;
  account_id: string | null;
  accepted_at: string | null;
  completed_at: string | null;
  revoked_at: string | null;
  member_id: string | null;
  subscription_id: string | null;
}

const dateOf = (s: string | null) => (s === null ? null : new Date(s));

/** The entity of a row read by hand-written SQL, detached from any unit of work. */
export function invitationOfRow(r: InvitationRow): Invitation {
  return Object.assign(new Invitation(), {
    id: r.id,
    merchantId: r.merchant_id,
    tokenHash: r.token_hash,
    firstName: r.first_name,
    lastName: r.last_name,
    email: r.email,
    phone: r.phone,
    expiresAt: new Date(r.expires_at),
    createdAt: new Date(r.created_at),
    accountId: r.account_id,
    acceptedAt: dateOf(r.accepted_at),
    completedAt: dateOf(r.completed_at),
    revokedAt: dateOf(r.revoked_at),
    memberId: r.member_id,
    subscriptionId: r.subscription_id,
  });
}

/** Every column of the entity's row, as hand-written SQL inserts it (what the ORM would write). */
export function rowOfInvitation(i: Invitation): InvitationRow {
  const iso = (d: Date | null) => d?.toISOString() ?? null;
  return {
    id: i.id,
    merchant_id: i.merchantId,
    token_hash: i.tokenHash,
    first_name: i.firstName,
    last_name: i.lastName,
    email: i.email,
    phone: i.phone,
    expires_at: i.expiresAt.toISOString(),
    created_at: i.createdAt.toISOString(),
    account_id: i.accountId,
    accepted_at: iso(i.acceptedAt),
    completed_at: iso(i.completedAt),
    revoked_at: iso(i.revokedAt),
    member_id: i.memberId,
    subscription_id: i.subscriptionId,
  };
}
