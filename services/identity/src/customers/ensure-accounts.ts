import type { MikroORM } from '@mikro-orm/postgresql';
import { queryPrepared } from '@billing/service-runtime';
import type { CustomerAccount } from './customer-account.js';

/** EnsureCustomerAccount's answer: the email's account, whether this request created it, and whether it is claimed. */
export interface EnsuredAccount {
  id: string;
  created: boolean;
  claimed: boolean;
}

// One statement for the whole batch: insert an unclaimed account for each email that has none
// in any letter case (the unique index on lower(email) decides between concurrent inserts), and
// answer each wanted account's (by its id) account of that email, the inserted one or the one
// already there. It costs identity a fraction of the ORM's read and multi-row insert (two round
// trips, the entity metadata walk, a failed batch retried row by row). `on conflict` names no
// target: while the redundant unique index on email itself remains (see
// Migration20261127000000_customer_email_as_sent), a conflict on either must be skipped, not raised.
// The account already there is looked up per wanted row (`lateral ... limit 1`, which the planner
// cannot flatten into a join): as a join, the generic plan of the named statement (the planner
// takes the recordset for 100 rows) was a hash join over a scan of every account, so each batch
// cost a read of the whole table (4 ms at 10,000 accounts, growing with them; 1 ms and 3 index
// lookups per row now).
export const ENSURE_SQL = `with wanted as (
    select * from jsonb_to_recordset($1::jsonb) as w(id uuid, email text, first_name text, last_name text, phone text, created_at timestamptz)),
  inserted as (
    insert into customer_accounts (id, email, first_name, last_name, phone, created_at, updated_at)
    select distinct on (lower(email)) id, email, first_name, last_name, phone, created_at, created_at from wanted order by lower(email), id
    on conflict do nothing
    returning id, lower(email) as email_key)
  select w.id as wanted_id, coalesce(i.id, a.id) as id, coalesce(a.password_hash is not null, false) as claimed
    from wanted w
    left join inserted i on i.email_key = lower(w.email)
    left join lateral (select a.id, a.password_hash from customer_accounts a where lower(a.email) = lower(w.email) limit 1) a on true`;

type EnsuredRow = { wanted_id: string; id: string | null; claimed: boolean };

/**
 * The account of each wanted email, created unclaimed (as `CustomerAccount.unclaimed` made it,
 * the email as given) when the email has none in any letter case, committed on its own. Requests
 * for one email in one batch, in any case, share its account, and only the one whose row was
 * inserted is told `created`. An email whose account another transaction committed after this
 * statement's snapshot was taken (its insert then does nothing, and the statement cannot see that
 * row) is asked again, once, by a statement that sees it.
 */
export async function ensureAccounts(orm: MikroORM, wanted: readonly CustomerAccount[]): Promise<EnsuredAccount[]> {
  const found = new Map<string, EnsuredRow>();
  let missing: readonly CustomerAccount[] = wanted;
  for (let attempt = 0; attempt < 2 && missing.length > 0; attempt++) {
    const { rows } = await queryPrepared<EnsuredRow>(orm, 'customer_accounts_ensure', ENSURE_SQL, [JSON.stringify(missing.map(rowOf))]);
    for (const r of rows) if (r.id) found.set(r.wanted_id, r);
    missing = missing.filter((w) => !found.has(w.id));
  }
  return wanted.map((w) => {
    const r = found.get(w.id);
    if (!r?.id) throw new Error('customer account neither inserted nor found');
    return { id: r.id, created: r.id === w.id, claimed: r.claimed };
  });
}

/** The columns an unclaimed account sets (the rest keep their defaults); one instant for both of its timestamps. */
function rowOf(a: CustomerAccount) {
  return { id: a.id, email: a.email, first_name: a.firstName, last_name: a.lastName, phone: a.phone, created_at: a.createdAt.toISOString() };
}
