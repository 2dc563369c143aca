import type { MikroORM } from '@mikro-orm/postgresql';
import { distinctUuids, DomainError, isUuidText } from '@billing/contracts';
import { decideItem, insertOutboxSql, isUniqueViolation, LOST, optimisticWriter, toOutboxJsonRow, typedDatabaseError, type CallScope, type ItemOutcome, type Lost, type OutboxJsonRow, type PreparedQuery } from '@billing/service-runtime';
import { injectTraceHeaders } from '@billing/telemetry';
import { pickScoped } from '../merchant-scope.js';
import { PaymentMethod, type InstrumentDetails } from './payment-method.js';
import { paymentMethodOfRow, rowOfPaymentMethod, type PaymentMethodRow } from './payment-method-row.js';
import { nextRank } from './ranking.js';

export interface AppendRequest {
  scope: CallScope;
  memberId: string;
  details: InstrumentDetails;
  /** The provider token the details came from, or null for a client-side tokenisation result. */
  providerToken: string | null;
}

/** The answer to an add: the stored method, and whether this add stored it. */
export interface Appended {
  paymentMethod: ReturnType<PaymentMethod['toMessage']>;
  created: boolean;
}

interface SubmittedAppend extends AppendRequest {
  /** Of the add's own request, for its event (the batch runs in one request's context). */
  traceContext: Record<string, string>;
}

/** How an add's attempt ended: answered, or lost to a concurrent add to its member (to be tried again). */
type AppendAttempt = ItemOutcome<Appended> | Lost;

/** The constraint that gives each of a member's methods its own rank. */
const RANK_CONSTRAINT = 'payment_methods_member_rank_unique';

/**
 * A row of the facts statements: a member (id and merchant), a rank of one of its methods, or the
 * method holding a wanted provider token.
 */
interface FactRow {
  member_id: string | null;
  merchant_id: string | null;
  rank: number | null;
  method: PaymentMethodRow | null;
}

const tokenKey = (merchantId: string, token: string) => `${merchantId}|${token}`;

/**
 * The methods holding the wanted tokens (`$1`/`$2` each token's merchant and token), each looked
 * up on the partial unique index (merchant_id, provider_token) by both columns: a lateral
 * subquery per token whose `limit 1` (the pair is unique) keeps the planner from flattening it
 * into a join, run unnamed (planned for each batch, with the table as it is). As a named join on
 * `merchant_id = any($1) and provider_token = any($2)`, the generic plan a connection made while
 * the merchant had no tokens took the index by merchant alone and filtered the tokens: every
 * later add from a token scanned all the merchant's tokened methods (auto_explain on the bench:
 * 976 buffers and 1,014 rows removed for one batch of nine). Named, even this form's kept plan
 * goes wrong when it is made on an empty table (a scan per token), hence unnamed.
 */
export const TOKENS_SQL = `select null::uuid as member_id, null::uuid as merchant_id, null::int as rank, to_jsonb(pm) as method
    from unnest($1::uuid[], $2::text[]) as t(merchant_id, provider_token)
    join lateral (select * from payment_methods p
                   where p.merchant_id = t.merchant_id and p.provider_token = t.provider_token and p.provider_token is not null
                   limit 1) pm on true`;

/**
 * The methods holding the wanted tokens, with TOKENS_SQL: a statement of its own, without the
 * ranks (joined to them, a batch that read the ranks with the members, no ranks asked here, made
 * Postgres plan it for every batch), unnamed (planned for each batch, with the table as it is).
 */
async function readTokens(query: PreparedQuery, wanted: readonly { merchantId: string; token: string }[]): Promise<FactRow[]> {
  return (await query<FactRow>(undefined, TOKENS_SQL, [wanted.map((w) => w.merchantId), wanted.map((w) => w.token)])).rows;
}

/**
 * Appends a method at its member's lowest rank and records `payment_method.added`. A provider
 * token already stored for the same member answers that method (`created: false`); for another
 * member of the merchant it is refused. Another merchant's member is `not_found`, as a missing one.
 *
 * Written in SQL and group-committed, as one of the platform's hot writes: the adds that arrive
 * together share one attempt, and adds for one member never share a batch. An attempt is
 * optimistic, two autocommit statements: one read, without locks, of the members and their
 * methods' ranks (and, for adds from a provider token, one of the tokens' methods); then, after
 * the domain has decided each add, one statement writing the new rows with their outbox events. The unique constraint on
 * (member, rank) is the compare-and-swap: an add that took a rank another add took meanwhile
 * fails the write, whose adds are all decided again on a fresh read in a later batch. After
 * five lost attempts (`OPTIMISTIC_ATTEMPTS`) an add is decided in a transaction holding its member's
 * row lock (a locking read of the members in id order, so concurrent batches cannot deadlock;
 * then the reads of their ranks and of the tokens; the same write), which cannot lose. The optimistic write
 * locks its members too, in id order, before it inserts (`for no key update`, which other
 * inserts referencing a member do not wait for): concurrent writes to one member then take turns
 * and the later one loses at once, instead of two waiting for each other at the deferred rank
 * constraint's check at commit (a deadlock Postgres breaks only after a second). Reorders
 * keep a member's ranks where they were (a permutation under the member's lock), so an add
 * racing one still takes the rank after the last.
 *
 * A DomainError is that add's answer and writes nothing of it; any other failure fails the
 * attempt (each write is one statement or one transaction: all or nothing) and its adds run
 * again one per attempt (`Batcher`), so a database error reaches only the add that causes it,
 * as MikroORM's typed exception (a concurrent add of the same token meets the unique index:
 * `UniqueConstraintViolationException`). `optimisticAttempts` (default 5): 0 decides every add
 * under its member's lock, as tests of that path do.
 */
export function methodAppender(orm: MikroORM, opts: { optimisticAttempts?: number } = {}): (req: AppendRequest) => Promise<Appended> {
  const append = optimisticWriter<SubmittedAppend, ItemOutcome<Appended>>(orm, attemptAppends, { keyOf: (req) => req.memberId.toLowerCase(), optimisticAttempts: opts.optimisticAttempts });
  return async (req) => {
    let outcome: ItemOutcome<Appended>;
    try {
      outcome = await append({ ...req, traceContext: injectTraceHeaders() });
    } catch (e) {
      throw typedDatabaseError(orm, e);
    }
    if (!outcome.ok) throw outcome.error;
    return outcome.value;
  };
}

/** One attempt of a batch of adds (see `methodAppender`, `optimisticWriter`): with `lock`, in the caller's transaction, under the members' row locks, where no add can lose. */
async function attemptAppends(query: PreparedQuery, batch: readonly SubmittedAppend[], opts: { lock: boolean }): Promise<AppendAttempt[]> {
  const ids = distinctUuids(batch.map((r) => r.memberId));
  const tokens = batch.filter((r) => isUuidText(r.memberId) && r.providerToken);
  let facts: FactRow[] = [];
  if (ids.length > 0) {
    // Adds under a merchant's scope name their tokens' merchant themselves (a member of another
    // merchant is not found): without locks, their tokens are read at the same time as the
    // members, on another connection of the pool, one wait where there were two.
    const scopedTokens = tokens.flatMap((r) => (r.scope.kind === 'merchant' ? [{ merchantId: r.scope.merchantId, token: r.providerToken! }] : []));
    const tokensAlongside = !opts.lock && tokens.length > 0 && scopedTokens.length === tokens.length;
    const [{ rows }, alongside] = await Promise.all([
      // The members: locked (in id order) under `lock`, else read with their methods' ranks.
      opts.lock
        ? query<FactRow>(
            'payment_method_append_lock',
            `select id as member_id, merchant_id, null::int as rank, null::jsonb as method from members where id = any($1::uuid[]) order by id for update`,
            [ids],
          )
        : query<FactRow>(
            // Unnamed, as the ranks below: a kept plan made while `payment_methods` was small scans it.
            undefined,
            `select id as member_id, merchant_id, null::int as rank, null::jsonb as method from members where id = any($1::uuid[])
             union all
             select member_id, null, rank, null from payment_methods where member_id = any($1::uuid[])`,
            [ids],
          ),
      tokensAlongside ? readTokens(query, scopedTokens) : undefined,
    ]);
    facts = rows;
    const merchants = new Map(rows.flatMap((r) => (r.merchant_id ? [[r.member_id!, r.merchant_id] as const] : [])));
    // Under `lock`, statements of their own after the lock: their snapshots are taken once the
    // lock is held, so they see the methods a concurrent add committed while this one waited.
    if (opts.lock && merchants.size > 0) {
      // Unnamed: planned for each batch with the table as it is. As a named statement, the plan a
      // connection made while `payment_methods` was nearly empty (a scan) was kept as the table
      // grew (auto_explain on the writes bench: 2,339 rows removed for one batch).
      facts.push(...(await query<FactRow>(undefined, `select member_id, null::uuid as merchant_id, rank, null::jsonb as method from payment_methods where member_id = any($1::uuid[])`, [[...merchants.keys()]])).rows);
    }
    if (alongside) facts.push(...alongside);
    else {
      const wanted = tokens.flatMap((r) => {
        const merchantId = merchants.get(r.memberId.toLowerCase());
        return merchantId ? [{ merchantId, token: r.providerToken! }] : [];
      });
      if (wanted.length > 0) facts.push(...(await readTokens(query, wanted)));
    }
  }
  const members = new Map<string, { id: string; merchantId: string }>();
  const ranks = new Map<string, { rank: number }[]>();
  const byToken = new Map<string, PaymentMethod>();
  for (const f of facts) {
    if (f.method) byToken.set(tokenKey(f.method.merchant_id, f.method.provider_token!), paymentMethodOfRow(f.method));
    else if (f.merchant_id) members.set(f.member_id!, { id: f.member_id!, merchantId: f.merchant_id });
    else ranks.set(f.member_id!, [...(ranks.get(f.member_id!) ?? []), { rank: f.rank! }]);
  }

  const inserts: PaymentMethodRow[] = [];
  const outbox: OutboxJsonRow[] = [];
  const decide = (req: SubmittedAppend): Appended => {
    const member = pickScoped(members, req.scope, req.memberId, 'Member');
    if (req.providerToken) {
      const existing = byToken.get(tokenKey(member.merchantId, req.providerToken));
      if (existing && existing.memberId === member.id) return { paymentMethod: existing.toMessage(), created: false };
      if (existing) throw DomainError.field('providerToken', 'This token is already used by another member.');
    }
    const pm = PaymentMethod.create({ ...req.details, merchantId: member.merchantId, memberId: member.id, rank: nextRank(ranks.get(member.id) ?? []), providerToken: req.providerToken });
    inserts.push(rowOfPaymentMethod(pm));
    outbox.push(toOutboxJsonRow(outbox.length, { type: 'payment_method.added', merchantId: pm.merchantId, data: pm.toView(), traceContext: req.traceContext }));
    return { paymentMethod: pm.toMessage(), created: true };
  };
  const outcomes = batch.map((req): ItemOutcome<Appended> => decideItem(() => decide(req)));
  if (inserts.length === 0) return outcomes;

  // One round trip for the rows and their events, each read from one JSON document. The members
  // are locked first, in id order (see `methodAppender`; under their row locks already, a no-op).
  let written: { inserted: number; events: number } | undefined;
  try {
    const { rows } = await query<{ inserted: number; events: number }>(
      'payment_method_append_write',
      `with locked as materialized (
         select id from members where id = any($3::uuid[]) order by id for no key update),
       inserted as (
         insert into payment_methods (id, merchant_id, member_id, type, brand, last4, expiry_month, expiry_year, account_name, bsb, provider_token, rank, created_at, updated_at)
         select m.id, m.merchant_id, m.member_id, m.type, m.brand, m.last4, m.expiry_month, m.expiry_year, m.account_name, m.bsb, m.provider_token, m.rank, m.created_at, m.updated_at
           from jsonb_to_recordset($1::jsonb) as m(id uuid, merchant_id uuid, member_id uuid, type text, brand text, last4 text, expiry_month smallint,
                  expiry_year smallint, account_name text, bsb text, provider_token text, rank int, created_at timestamptz, updated_at timestamptz)
          where m.member_id in (select id from locked)
         returning 1),
       events as (
         ${insertOutboxSql('$2')}
         returning 1)
       select (select count(*) from inserted)::int as inserted, (select count(*) from events)::int as events`,
      [JSON.stringify(inserts), JSON.stringify(outbox), [...new Set(inserts.map((r) => r.member_id))].sort()],
    );
    written = rows[0];
  } catch (e) {
    // Another add took a rank this attempt took: every add it would have written is decided again.
    if (!opts.lock && isUniqueViolation(e, RANK_CONSTRAINT)) return outcomes.map((o) => (o.ok && o.value.created ? LOST : o));
    throw e;
  }
  // Cannot happen (a refused row fails the statement); thrown, so the attempt fails as a whole.
  if (written!.inserted !== inserts.length || written!.events !== outbox.length) throw new Error(`payment method append wrote ${written!.inserted}/${inserts.length} rows, ${written!.events}/${outbox.length} events`);
  return outcomes;
}
