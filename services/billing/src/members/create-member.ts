import { ForeignKeyConstraintViolationException, UniqueConstraintViolationException, type MikroORM } from '@mikro-orm/postgresql';
import { DomainError, type CreateMemberRequest } from '@billing/contracts';
import { Batcher, emailInAnyCase, insertOutboxSql, queryPrepared, toOutboxJsonRow, typedDatabaseError } from '@billing/service-runtime';
import { injectTraceHeaders } from '@billing/telemetry';
import { Member } from './member.js';
import { memberOfRow, rowOfMember, type MemberRow } from './member-row.js';

/** How a member is found by email: its merchant and the email trimmed and lower-cased (the unique index is on lower(email)). */
const emailKey = (merchantId: string, email: string) => `${merchantId}|${email.trim().toLowerCase()}`;

/** Exact email match, case-insensitive (served by the unique index on lower(email)). */
export function byEmail(merchantId: string, email: string) {
  return { merchantId, ...emailInAnyCase(email.trim()) };
}

/** `member.created` data: the member as the REST API shows it. */
export function toMemberEvent(m: Member): Record<string, unknown> {
  return { ...m.toMessage(), phone: m.phone };
}

type NewMember = CreateMemberRequest & { merchantId: string };

/** The answer to a create: the member of that email, and whether this create made it. */
export interface CreatedMember {
  member: ReturnType<Member['toMessage']>;
  created: boolean;
}

interface SubmittedMember {
  input: NewMember;
  /** Of the create's own request, for its event (the batch runs in one request's context). */
  traceContext: Record<string, string>;
}

type CreateOutcome = { ok: true; value: CreatedMember } | { ok: false; error: Error };

/**
 * The creates of one batch: $1 the members (with `seq` and `email_key`, the email as matched) as
 * JSON, $2 their `member.created` outbox rows as JSON. The existing member of each email is looked
 * up per create (`lateral ... limit 1`, which the planner cannot flatten into a join) on the unique
 * index on (merchant_id, lower(email)), so the statement is named (parsed and planned once per
 * connection) with a plan that stays on the index however the table grows. Joined to the JSON
 * recordset (which the planner takes for 100 rows), the lookup was a scan of every member in the
 * generic plan a connection made while the table was small, so the statement was unnamed and
 * planned for each batch (350 to 550 µs of Postgres per batch, pg_stat_statements on the bench).
 */
export const CREATE_MEMBERS_SQL = `with requested as (
     select * from jsonb_to_recordset($1::jsonb) as r(seq int, email_key text, id uuid, merchant_id uuid, email text, first_name text, last_name text,
                                                    phone text, created_at timestamptz, updated_at timestamptz)),
   found as (
     select r.seq, to_jsonb(m) as member
       from requested r
       join lateral (select m.* from members m where m.merchant_id = r.merchant_id and lower(m.email) = r.email_key limit 1) m on true),
   inserted as (
     insert into members (id, merchant_id, email, first_name, last_name, phone, created_at, updated_at)
     select r.id, r.merchant_id, r.email, r.first_name, r.last_name, r.phone, r.created_at, r.updated_at
       from requested r
      where not exists (select from found f where f.seq = r.seq)
      order by r.seq
     returning id),
   events as (
     ${insertOutboxSql('$2', { column: 'member_id', written: 'inserted' })}
     returning 1)
   select coalesce((select jsonb_agg(jsonb_build_object('seq', seq, 'member', member)) from found), '[]') as found,
          (select count(*) from inserted)::int as inserted, (select count(*) from events)::int as events`;

/**
 * Create-member, one of the platform's hot writes, in SQL and group-committed: the creates that
 * arrive together are one statement, which looks up their emails and inserts the members not
 * found with their `member.created` events (one round trip and no transaction to open, where the
 * ORM spent a read, a BEGIN, an insert per table and a COMMIT, and its unit of work per create).
 * Answers the existing member of that email unchanged (`created: false`), or the new one.
 * Creates of one email never share a batch; two that race from different batches (or replicas)
 * meet the unique index, which fails the statement: its creates run again one by one
 * (`Batcher`), and a loser then finds the winner's member, or, if the winner had not committed
 * when the lookup ran, answers with it after the violation.
 */
export function memberCreation(orm: MikroORM): (input: NewMember) => Promise<CreatedMember> {
  const creates = new Batcher<SubmittedMember, CreateOutcome>(
    async (batch) => {
      const members = batch.map(({ input }) => Member.create(input));
      const rows = members.map((m, seq) => ({ seq, email_key: m.email.trim().toLowerCase(), ...rowOfMember(m) }));
      const outbox = members.map((m, seq) => ({
        ...toOutboxJsonRow(seq, { type: 'member.created', merchantId: m.merchantId, data: toMemberEvent(m), traceContext: batch[seq]!.traceContext }),
        member_id: m.id,
      }));
      const res = await queryPrepared<{ found: { seq: number; member: MemberRow }[]; inserted: number; events: number }>(orm, 'member_create_batch', CREATE_MEMBERS_SQL, [
        JSON.stringify(rows),
        JSON.stringify(outbox),
      ]);
      const [row] = res.rows;
      const found = new Map(row!.found.map((f) => [f.seq, memberOfRow(f.member)]));
      // Cannot happen (every create not found is inserted, with its event); reported per request
      // rather than thrown, since the statement has committed and must not be retried.
      if (row!.inserted !== batch.length - found.size || row!.events !== row!.inserted) {
        const error = new Error(`member create wrote ${row!.inserted}/${batch.length - found.size} rows, ${row!.events} events`);
        return batch.map(() => ({ ok: false as const, error }));
      }
      return members.map((m, seq) => {
        const existing = found.get(seq);
        return { ok: true as const, value: existing ? { member: existing.toMessage(), created: false } : { member: m.toMessage(), created: true } };
      });
    },
    { keyOf: ({ input }) => emailKey(input.merchantId, input.email) },
  );

  return async (input) => {
    let outcome: CreateOutcome;
    try {
      outcome = await creates.submit({ input, traceContext: injectTraceHeaders() });
    } catch (e) {
      const error = typedDatabaseError(orm, e);
      if (error instanceof ForeignKeyConstraintViolationException) throw new DomainError('merchant_not_found', 'Merchant not found.');
      if (!(error instanceof UniqueConstraintViolationException)) throw error;
      const winner = await orm.em.fork().findOne(Member, byEmail(input.merchantId, input.email));
      if (!winner) throw error;
      return { member: winner.toMessage(), created: false };
    }
    if (!outcome.ok) throw outcome.error;
    return outcome.value;
  };
}
