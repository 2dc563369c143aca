import type { EntityManager, MikroORM } from '@mikro-orm/postgresql';
import { DomainError, isUuidText, pageWindow } from '@billing/contracts';
import { formatDecimal, MAX_MINOR_UNITS, toMajorUnits } from '@billing/money';
import { instantOfRow, queryRows, recordEvent, type CallScope } from '@billing/service-runtime';
import { Merchant } from '../merchants/merchant.js';
import { findScoped } from '../merchant-scope.js';
import { FeeStatement, type LineTotals } from './fee-statement.js';

export interface FeeStatementLineRow {
  transactionId: string;
  occurredAt: string;
  description: string;
  reference: string;
  status: string;
  amountMinor: number;
  feeMinor: number;
  netMinor: number;
}

export function findStatement(em: EntityManager, scope: CallScope, id: string, opts: { lock?: boolean } = {}): Promise<FeeStatement> {
  return findScoped(em, FeeStatement, scope, id, 'Fee statement', opts);
}

/**
 * (Re)takes the statement's lines from the merchant's transactions (contract §10): charges that
 * occurred in the period and are Settled or Processing, with their fee and net; refunds in the
 * period with negative amount, no fee and negative net. A transaction already on another closed
 * (Finalised or Paid) statement is left out, so overlapping periods never bill a fee twice
 * (finalising holds the merchant's statement lock, `lockMerchantStatements`). And reversals: a
 * charge a closed statement billed while it was Processing (a bank debit in its settlement
 * window) that failed since, before this period's end (its `updated_at`: the billing run's
 * `asOf` that recorded the failure), gets a line with status Failed, dated then, with the
 * billed line's amount, fee and net negated, so the merchant is credited the fee of a charge
 * that never settled; likewise a refund billed while Processing (its provider call's outcome
 * unknown) that failed since, whose reversal takes back the net the merchant was credited for
 * a refund that never happened; once per transaction (not when a closed statement has its reversal), on the first
 * statement closed after the failure whatever its period starts. The totals are then summed from the stored lines, so
 * they are the sums of the lines by construction.
 */
async function takeLines(em: EntityManager, s: FeeStatement): Promise<void> {
  s.assertLinesOpen();
  // One insert-select: the lines are a report over the period's transactions.
  await queryRows(em, `delete from fee_statement_lines where statement_id = ?`, [s.id]);
  await queryRows(
    em,
    `insert into fee_statement_lines (statement_id, transaction_id, occurred_at, description, reference, status, amount_minor, fee_minor, net_minor)
     select ?::uuid, t.id, t.occurred_at,
            case when t.kind = 'Charge' then 'Charge' || coalesce(' for subscription ' || t.subscription_id, '') || case when t.attempt > 1 then ' (attempt ' || t.attempt || ')' else '' end
                 else 'Refund of charge ' || t.original_transaction_id end,
            coalesce(t.provider_ref, t.id::text), t.status,
            case when t.kind = 'Charge' then t.amount_minor else -t.amount_minor end,
            case when t.kind = 'Charge' then t.fee_minor else 0 end,
            case when t.kind = 'Charge' then t.amount_minor - t.fee_minor else -t.amount_minor end
       from transactions t
      where t.merchant_id = ?::uuid and t.currency = ? and t.occurred_at >= ?::timestamptz and t.occurred_at < ?::timestamptz
        and t.status in ('Settled','Processing')
        and not exists (select 1 from fee_statement_lines l join fee_statements f on f.id = l.statement_id
                         where l.transaction_id = t.id and f.id <> ?::uuid and f.status in ('Finalised','Paid'))`,
    [s.id, s.merchantId, s.currency, s.periodStart.toISOString(), s.periodEnd.toISOString(), s.id],
  );
  // Driven by the merchant's closed statements' Processing lines (few), not by its transactions.
  await queryRows(
    em,
    `insert into fee_statement_lines (statement_id, transaction_id, occurred_at, description, reference, status, amount_minor, fee_minor, net_minor)
     select distinct on (t.id) ?::uuid, t.id, t.updated_at,
            'Reversal of ' || lower(t.kind) || ' ' || t.id || ', billed while Processing on statement ' || f.reference || ', failed: ' || coalesce(t.failure_reason, 'failed'),
            coalesce(t.provider_ref, t.id::text), 'Failed', -l.amount_minor, -l.fee_minor, -l.net_minor
       from fee_statements f
       join fee_statement_lines l on l.statement_id = f.id and l.status = 'Processing'
       join transactions t on t.id = l.transaction_id
      where f.merchant_id = ?::uuid and f.id <> ?::uuid and f.status in ('Finalised','Paid')
        and t.status = 'Failed' and t.currency = ? and t.updated_at < ?::timestamptz
        and not exists (select 1 from fee_statement_lines r join fee_statements g on g.id = r.statement_id
                         where r.transaction_id = t.id and r.status = 'Failed' and g.id <> ?::uuid and g.status in ('Finalised','Paid'))
      order by t.id`,
    [s.id, s.merchantId, s.id, s.currency, s.periodEnd.toISOString(), s.id],
  );
  const [totals] = await queryRows<{ fees: string; net: string; n: number }>(
    em,
    `select coalesce(sum(fee_minor), 0)::text as fees, coalesce(sum(net_minor), 0)::text as net, count(*)::int as n from fee_statement_lines where statement_id = ?`,
    [s.id],
  );
  assertStatable(totals!.fees, s.currency, 'fees');
  assertStatable(totals!.net, s.currency, 'net amounts');
  const t: LineTotals = { totalFeesMinor: Number(totals!.fees), totalNetMinor: Number(totals!.net), transactionCount: totals!.n };
  s.setTotals(t);
}

/**
 * A total the API can state: no larger than the largest amount it carries (`MAX_MINOR_UNITS`),
 * which keeps its decimal exact in JSON. Each line is (it is one transaction's), but a period's
 * sum need not be; such a statement is refused (422) inside the transaction that took its lines,
 * so nothing of it is stored, rather than stored and then unreadable (it was a 500 on generate
 * and on every list of statements that held it).
 */
function assertStatable(totalMinor: string, currency: string, what: string): void {
  const total = BigInt(totalMinor);
  if (total <= BigInt(MAX_MINOR_UNITS) && total >= -BigInt(MAX_MINOR_UNITS)) return;
  throw new DomainError(
    'unprocessable',
    `The period's ${what} total more than ${formatDecimal(MAX_MINOR_UNITS, currency)} ${currency}, the largest amount a statement can state: generate statements over shorter periods.`,
  );
}

function recordStatementEvents(em: EntityManager, s: FeeStatement): void {
  for (const type of s.pullEvents()) {
    recordEvent(em, {
      type,
      merchantId: s.merchantId,
      data: {
        id: s.id,
        statementId: s.id,
        merchantId: s.merchantId,
        reference: s.reference,
        status: s.status,
        periodStart: s.periodStart.toISOString(),
        periodEnd: s.periodEnd.toISOString(),
        currency: s.currency,
        totalFees: toMajorUnits(Number(s.totalFeesMinor), s.currency),
        totalNet: toMajorUnits(Number(s.totalNetMinor), s.currency),
        transactionCount: s.transactionCount,
        finalisedAt: s.finalisedAt?.toISOString() ?? null,
        paidAt: s.paidAt?.toISOString() ?? null,
        // As every read states it: '' until pay gives one.
        paymentReference: s.paymentReference ?? '',
      },
    });
  }
}

/**
 * A Draft statement of the merchant's transactions in the period in `currency`. Without one, in
 * the currency of the transactions that would be its lines, reversals included (AUD when there
 * are none); when they are in several, 400 naming `currency` and them, rather than a statement
 * that silently leaves some out.
 */
export async function generateStatement(orm: MikroORM, input: { merchantId: string; periodStart: Date; periodEnd: Date; currency?: string }): Promise<FeeStatement> {
  return orm.em.fork().transactional(async (em) => {
    if (!isUuidText(input.merchantId) || !(await em.findOne(Merchant, { id: input.merchantId.toLowerCase() }))) throw new DomainError('merchant_not_found', 'Merchant not found.');
    const merchantId = input.merchantId.toLowerCase();
    const currency = input.currency ?? (await periodCurrency(em, merchantId, input.periodStart, input.periodEnd));
    const s = FeeStatement.generate({ ...input, merchantId, currency });
    em.persist(s);
    await em.flush();
    await takeLines(em, s);
    return s;
  });
}

/**
 * The one currency of the lines a statement of the period would have: its charges and refunds not
 * billed on a closed statement yet, and the reversals it would credit (a charge or refund billed
 * while Processing on a closed statement that failed before the period's end, whatever currency
 * the period's own transactions are in). AUD when there are none.
 */
async function periodCurrency(em: EntityManager, merchantId: string, periodStart: Date, periodEnd: Date): Promise<string> {
  // The lines' conditions are those of `takeLines`, for a statement not stored yet.
  const rows = await queryRows<{ currency: string }>(
    em,
    `select t.currency from transactions t
      where t.merchant_id = ?::uuid and t.occurred_at >= ?::timestamptz and t.occurred_at < ?::timestamptz and t.status in ('Settled','Processing')
        and not exists (select 1 from fee_statement_lines l join fee_statements f on f.id = l.statement_id
                         where l.transaction_id = t.id and f.status in ('Finalised','Paid'))
     union
     select t.currency from fee_statements f
       join fee_statement_lines l on l.statement_id = f.id and l.status = 'Processing'
       join transactions t on t.id = l.transaction_id
      where f.merchant_id = ?::uuid and f.status in ('Finalised','Paid') and t.status = 'Failed' and t.updated_at < ?::timestamptz
        and not exists (select 1 from fee_statement_lines r join fee_statements g on g.id = r.statement_id
                         where r.transaction_id = t.id and r.status = 'Failed' and g.status in ('Finalised','Paid'))
      order by 1`,
    [merchantId, periodStart.toISOString(), periodEnd.toISOString(), merchantId, periodEnd.toISOString()],
  );
  if (rows.length > 1) {
    throw DomainError.field(
      'currency',
      `The merchant has transactions in ${rows.map((r) => r.currency).join(', ')} to bill in this period (its charges and refunds, and reversals of ones billed earlier that failed); a statement is in one currency: generate one for each, naming it.`,
    );
  }
  return rows[0]?.currency ?? 'AUD';
}

/**
 * Finalising statements of one merchant one at a time: a statement's lines, taken under this
 * lock, see every transaction the others closed with (READ COMMITTED: each statement reads what
 * was committed when it starts).
 */
async function lockMerchantStatements(em: EntityManager, merchantId: string): Promise<void> {
  await queryRows(em, `select pg_advisory_xact_lock(hashtextextended('fee_statements:' || ?, 0))`, [merchantId]);
}

/** Draft → Finalised: the lines are taken a last time and frozen. */
export async function finaliseStatement(orm: MikroORM, scope: CallScope, id: string): Promise<FeeStatement> {
  return orm.em.fork().transactional(async (em) => {
    const s = await findStatement(em, scope, id, { lock: true });
    await lockMerchantStatements(em, s.merchantId);
    await takeLines(em, s);
    s.finalise();
    recordStatementEvents(em, s);
    return s;
  });
}

export async function payStatement(orm: MikroORM, scope: CallScope, id: string, input: { paymentReference?: string | null; notes?: string | null }): Promise<FeeStatement> {
  return orm.em.fork().transactional(async (em) => {
    const s = await findStatement(em, scope, id, { lock: true });
    s.pay(input);
    recordStatementEvents(em, s);
    return s;
  });
}

export async function statementLines(orm: MikroORM, scope: CallScope, id: string, page: { page: number; pageSize: number }): Promise<{ items: FeeStatementLineRow[]; totalCount: number }> {
  const em = orm.em.fork();
  const s = await findStatement(em, scope, id);
  const { limit, offset } = pageWindow(page);
  const items = await queryRows<FeeStatementLineRow>(
    em,
    `select transaction_id as "transactionId", occurred_at as "occurredAt", description, reference, status,
            amount_minor::text as "amountMinor", fee_minor::text as "feeMinor", net_minor::text as "netMinor"
       from fee_statement_lines where statement_id = ? order by occurred_at, transaction_id limit ? offset ?`,
    [s.id, limit, offset],
  );
  return {
    items: items.map((r) => ({ ...r, occurredAt: instantOfRow(r.occurredAt).toISOString(), amountMinor: Number(r.amountMinor), feeMinor: Number(r.feeMinor), netMinor: Number(r.netMinor) })),
    totalCount: s.transactionCount,
  };
}
