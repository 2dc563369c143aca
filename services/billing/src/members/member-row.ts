import { Member } from './member.js';

/** A `members` row as jsonb (`to_jsonb`, or the document an insert reads): instants in ISO 8601. */
export interface MemberRow {
  id: string;
  merchant_id: string;
  email: string;
  first_name: string;
  last_name: string;
  phone: string | null;
  created_at: string;
  updated_at: string;
}

/** The entity of a row read by hand-written SQL, detached from any unit of work. */
export function memberOfRow(r: MemberRow): Member {
  return Object.assign(new Member(), {
    id: r.id,
    merchantId: r.merchant_id,
    email: r.email,
    firstName: r.first_name,
    lastName: r.last_name,
    phone: r.phone,
    createdAt: new Date(r.created_at),
    updatedAt: new Date(r.updated_at),
  });
}

/** Every column of the entity's row, as hand-written SQL inserts it (what the ORM would write). */
export function rowOfMember(m: Member): MemberRow {
  return {
    id: m.id,
    merchant_id: m.merchantId,
    email: m.email,
    first_name: m.firstName,
    last_name: m.lastName,
    phone: m.phone,
    created_at: m.createdAt.toISOString(),
    updated_at: m.updatedAt.toISOString(),
  };
}
