import type { MikroORM } from '@mikro-orm/postgresql';
import { DomainError, isUuidText } from '@billing/contracts';
import { Batcher, decideItem, insertOutboxSql, toOutboxJsonRow, transactPrepared, typedDatabaseError, type CallScope, type ItemOutcome, type OutboxJsonRow } from '@billing/service-runtime';
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

type AppendOutcome = ItemOutcome<Appended>;

/** A row of the facts statement: a rank of a locked member's method, or the method holding a wanted provider token. */
interface FactRow {
  member_id: string | null;
  rank: number | null;
  method: PaymentMethodRow | null;
}

const tokenKey = (merchantId: string, token: string) => `${merchantId}|${token}`;

/**
 * Appends a method at its member's lowest rank and records `payment_method.added`, in a
 * transaction holding the member's row lock (so concurrent adds get distinct ranks). A provider
 * token already stored for the same member answers that method (`created: false`); for another
 * member of the merchant it is refused. Another merchant's member is `not_found`, as a missing one.
 *
 * Written in SQL and group-committed, as one of the platform's hot writes: the adds that arrive
 * together share one transaction of three statements (a locking read of their members in id
 * order, so concurrent batches cannot deadlock; one read of those members' ranks and of the
 * wanted tokens' methods; one write of the new rows with their outbox events), where the ORM
 * spent a statement per kind of row and its unit of work per add. Adds for one member never
 * share a batch. A DomainError is that add's answer and writes nothing of it; any other failure
 * rolls the batch back and its adds run again one per transaction (`Batcher`), so a database
 * error reaches only the add that causes it, as MikroORM's typed exception (a concurrent add of
 * the same token meets the unique index: `UniqueConstraintViolationException`).
 */
export function methodAppender(orm: MikroORM): (req: AppendRequest) => Promise<Appended> {
  const appends = new Batcher<SubmittedAppend, AppendOutcome>(
    (batch) =>
      transactPrepared(orm, async (query) => {
        const ids = [...new Set(batch.filter((r) => isUuidText(r.memberId)).map((r) => r.memberId.toLowerCase()))];
        const { rows: locked } = ids.length === 0 ? { rows: [] } : await query<{ id: string; merchant_id: string }>(
          'payment_method_append_lock',
          `select id, merchant_id from members where id = any($1::uuid[]) order by id for update`,
          [ids],
        );
        const members = new Map(locked.map((m) => [m.id, { id: m.id, merchantId: m.merchant_id }]));
        const wanted = batch.flatMap((r) => {
          const member = isUuidText(r.memberId) ? members.get(r.memberId.toLowerCase()) : undefined;
          return member && r.providerToken ? [{ merchantId: member.merchantId, token: r.providerToken }] : [];
        });
        // A statement of its own after the lock: its snapshot is taken once the lock is held, so it
        // sees the methods a concurrent add committed while this one waited. The tokens' `any()`
        // conditions keep their lookup on the partial unique index (merchant_id, provider_token).
        const { rows: facts } = members.size === 0 ? { rows: [] } : await query<FactRow>(
          'payment_method_append_facts',
          `select member_id, rank, null::jsonb as method from payment_methods where member_id = any($1::uuid[])
           union all
           select null, null, to_jsonb(pm)
             from payment_methods pm join unnest($2::uuid[], $3::text[]) as t(merchant_id, provider_token)
               on pm.merchant_id = t.merchant_id and pm.provider_token = t.provider_token
            where pm.merchant_id = any($2::uuid[]) and pm.provider_token = any($3::text[]) and pm.provider_token is not null`,
          [[...members.keys()], wanted.map((w) => w.merchantId), wanted.map((w) => w.token)],
        );
        const ranks = new Map<string, { rank: number }[]>();
        const byToken = new Map<string, PaymentMethod>();
        for (const f of facts) {
          if (f.method) byToken.set(tokenKey(f.method.merchant_id, f.method.provider_token!), paymentMethodOfRow(f.method));
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
        const outcomes = batch.map((req): AppendOutcome => decideItem(() => decide(req)));

        if (inserts.length > 0) {
          // One round trip for the rows and their events, each read from one JSON document.
          const { rows } = await query<{ inserted: number; events: number }>(
            'payment_method_append_write',
            `with inserted as (
               insert into payment_methods (id, merchant_id, member_id, type, brand, last4, expiry_month, expiry_year, account_name, bsb, provider_token, rank, created_at, updated_at)
               select m.id, m.merchant_id, m.member_id, m.type, m.brand, m.last4, m.expiry_month, m.expiry_year, m.account_name, m.bsb, m.provider_token, m.rank, m.created_at, m.updated_at
                 from jsonb_to_recordset($1::jsonb) as m(id uuid, merchant_id uuid, member_id uuid, type text, brand text, last4 text, expiry_month smallint,
                        expiry_year smallint, account_name text, bsb text, provider_token text, rank int, created_at timestamptz, updated_at timestamptz)
               returning 1),
             events as (
               ${insertOutboxSql('$2')}
               returning 1)
             select (select count(*) from inserted)::int as inserted, (select count(*) from events)::int as events`,
            [JSON.stringify(inserts), JSON.stringify(outbox)],
          );
          // Cannot happen (a refused row fails the statement); thrown, so the transaction rolls back.
          const [row] = rows;
          if (row!.inserted !== inserts.length || row!.events !== outbox.length) throw new Error(`payment method append wrote ${row!.inserted}/${inserts.length} rows, ${row!.events}/${outbox.length} events`);
        }
        return outcomes;
      }),
    { keyOf: (req) => req.memberId.toLowerCase() },
  );

  return async (req) => {
    let outcome: AppendOutcome;
    try {
      outcome = await appends.submit({ ...req, traceContext: injectTraceHeaders() });
    } catch (e) {
      throw typedDatabaseError(orm, e);
    }
    if (!outcome.ok) throw outcome.error;
    return outcome.value;
  };
}
