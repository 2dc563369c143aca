import type { MikroORM } from '@mikro-orm/postgresql';
import { distinctUuids, DomainError, isUuidText, type PlanInterval } from '@billing/contracts';
import { Batcher, decideItem, queryPrepared, transactPrepared, typedDatabaseError, type CallScope, type ItemOutcome } from '@billing/service-runtime';
import { Plan } from './plan.js';

/** A plan to create inside one merchant; `Plan.create` validates the rest. */
export type NewPlan = Omit<Parameters<typeof Plan.create>[0], 'merchantId' | 'productId'> & { merchantId: string; productId: string };

/** A change of one plan (see `Plan.update`), by id, inside the call's scope. */
export interface PlanChange {
  scope: CallScope;
  id: string;
  name?: string | null;
  isActive?: boolean | null;
}

type Outcome = { ok: true; plan: Plan } | { ok: false; error: DomainError };

/** A `plans` row as `to_jsonb` gives it (instants in ISO 8601, `amount_minor` a JSON number: always a safe integer). */
interface PlanRow {
  id: string;
  merchant_id: string;
  product_id: string;
  name: string;
  amount_minor: number;
  currency: string;
  billing_interval: PlanInterval;
  interval_count: number;
  trial_days: number;
  is_active: boolean;
  created_at: string;
  updated_at: string;
}

function planOfRow(r: PlanRow): Plan {
  return Object.assign(new Plan(), {
    id: r.id,
    merchantId: r.merchant_id,
    productId: r.product_id,
    name: r.name,
    amountMinor: r.amount_minor,
    currency: r.currency,
    interval: r.billing_interval,
    intervalCount: r.interval_count,
    trialDays: r.trial_days,
    isActive: r.is_active,
    createdAt: new Date(r.created_at),
    updatedAt: new Date(r.updated_at),
  });
}

/**
 * The plans with these ids (malformed ids find nothing), by id: one prepared statement, hand-
 * mapped as `planOfRow`, for GetPlan's coalesced reads (every checkout link and onboarding asks).
 */
export async function loadPlans(orm: MikroORM, ids: readonly string[]): Promise<Map<string, Plan>> {
  const wanted = distinctUuids(ids);
  if (wanted.length === 0) return new Map();
  const { rows } = await queryPrepared<{ plan: PlanRow }>(orm, 'plans_by_id', `select to_jsonb(p) as plan from plans p where p.id = any($1::uuid[])`, [wanted]);
  return new Map(rows.map(({ plan }) => [plan.id, planOfRow(plan)]));
}

const notFound = (what: string) => new DomainError('not_found', `${what} not found.`);

/**
 * Persistence of create-plan and update-plan, group-committed in hand-written SQL instead of an
 * ORM transaction per batch (BEGIN, a read, the unit of work's insert or update, COMMIT, and its
 * bookkeeping), because on these paths the round trips and the ORM cost more than the SQL they
 * carry. The domain still decides (`Plan.create`, `plan.update`); the rows written are the ones
 * the ORM wrote, every column (`plan-store.int.test.ts` holds it to that). Neither write has an
 * event. A DomainError is its own request's answer; any other failure fails the batch, whose
 * requests then run again one by one (`Batcher`), and leaves as MikroORM's typed exception.
 */
export class PlanStore {
  constructor(private readonly orm: MikroORM) {}

  /**
   * Validates and inserts a plan of a product of `merchantId`, as of today's rules: a product
   * that is missing or another merchant's is `Product not found.`, and that answer comes before
   * any validation error. Resolves once the insert has committed.
   */
  async create(input: NewPlan): Promise<Plan> {
    return settle(this.orm, this.creates.submit(input));
  }

  /**
   * Changes a plan under its row lock: the updates that arrive together share one transaction of
   * a locking read of their plans (in id order, so concurrent batches cannot deadlock) and one
   * update of them; two updates of one plan never share a batch, and a later batch waits for the
   * lock. Another merchant's plan is `Plan not found.`, as a missing one.
   */
  async update(change: PlanChange): Promise<Plan> {
    return settle(this.orm, this.updates.submit(change));
  }

  private readonly creates = new Batcher<NewPlan, Outcome>(async (batch) => {
    // Each request is decided before the write: refused (malformed product id, invalid plan) or a plan to insert.
    const decided = batch.map(
      (input): ItemOutcome<Plan> =>
        isUuidText(input.productId) ? decideItem(() => Plan.create({ ...input, productId: input.productId.toLowerCase() })) : { ok: false, error: notFound('Product') },
    );
    // The rows ask for their product in scope; an invalid plan's row asks only that (its id is
    // null, so it inserts nothing), since a missing product is its answer before the invalid plan.
    const asks = decided.flatMap((d, seq) => {
      const input = batch[seq]!;
      if (!isUuidText(input.productId)) return [];
      const p = d.ok ? d.value : undefined;
      return [
        p
          ? {
              seq,
              id: p.id,
              merchant_id: p.merchantId,
              product_id: p.productId,
              name: p.name,
              amount_minor: p.amountMinor,
              currency: p.currency,
              billing_interval: p.interval,
              interval_count: p.intervalCount,
              trial_days: p.trialDays,
              is_active: p.isActive,
              created_at: p.createdAt.toISOString(),
              updated_at: p.updatedAt.toISOString(),
            }
          : { seq, id: null, merchant_id: input.merchantId, product_id: input.productId.toLowerCase() },
      ];
    });
    let found = new Set<number>();
    if (asks.length > 0) {
      // One autocommit statement for the batch, the scope check and the insert: atomic, one round
      // trip. It has no conflict clause, so it inserts every scoped plan or fails as a whole.
      // `p.id = any($2)` (the products named) keeps the join on the primary key: the planner takes
      // a JSON recordset for 100 rows and, joined to it alone, scanned every product instead.
      const res = await queryPrepared<{ found: number[] }>(
        this.orm,
        'plan_insert_batch',
        `with r as (
           select * from jsonb_to_recordset($1::jsonb) as r(seq int, id uuid, merchant_id uuid, product_id uuid, name text, amount_minor bigint, currency text,
                    billing_interval text, interval_count int, trial_days int, is_active boolean, created_at timestamptz, updated_at timestamptz)),
         scoped as (
           select r.* from r join products p on p.id = r.product_id and p.merchant_id = r.merchant_id where p.id = any($2::uuid[])),
         inserted as (
           insert into plans (id, merchant_id, product_id, name, amount_minor, currency, billing_interval, interval_count, trial_days, is_active, created_at, updated_at)
           select s.id, s.merchant_id, s.product_id, s.name, s.amount_minor, s.currency, s.billing_interval, s.interval_count, s.trial_days, s.is_active, s.created_at, s.updated_at
             from scoped s
            where s.id is not null
            order by s.seq)
         select coalesce(json_agg(seq), '[]') as found from scoped`,
        [JSON.stringify(asks), [...new Set(asks.map((a) => a.product_id))]],
      );
      found = new Set(res.rows[0]!.found);
    }
    return decided.map((d, seq): Outcome => (!found.has(seq) ? { ok: false, error: notFound('Product') } : d.ok ? { ok: true, plan: d.value } : d));
  });

  private readonly updates = new Batcher<PlanChange, Outcome>(
    (batch) =>
      transactPrepared(this.orm, async (query) => {
        const ids = distinctUuids(batch.map((c) => c.id));
        const { rows } = ids.length === 0 ? { rows: [] } : await query<{ plan: PlanRow }>('plan_update_lock', `select to_jsonb(p) as plan from plans p where p.id = any($1::uuid[]) order by p.id for update`, [ids]);
        const loaded = new Map(rows.map((r) => [r.plan.id, r.plan]));
        const outcomes: Outcome[] = [];
        const changed: { id: string; name: string; is_active: boolean; updated_at: string }[] = [];
        for (const c of batch) {
          const row = isUuidText(c.id) ? loaded.get(c.id.toLowerCase()) : undefined;
          if (!row || (c.scope.kind === 'merchant' && row.merchant_id !== c.scope.merchantId)) {
            outcomes.push({ ok: false, error: notFound('Plan') });
            continue;
          }
          const plan = planOfRow(row);
          const updated = decideItem(() => plan.update({ name: c.name, isActive: c.isActive }));
          if (!updated.ok) {
            outcomes.push(updated);
            continue;
          }
          // Every column `update` may change, written back (an unchanged one keeps its value under the lock).
          changed.push({ id: plan.id, name: plan.name, is_active: plan.isActive, updated_at: plan.updatedAt.toISOString() });
          outcomes.push({ ok: true, plan });
        }
        if (changed.length > 0) {
          // `p.id = any($2)`: on the primary key, as for the insert above.
          const res = await query(
            'plan_update_write',
            `update plans p set name = c.name, is_active = c.is_active, updated_at = c.updated_at
               from jsonb_to_recordset($1::jsonb) as c(id uuid, name text, is_active boolean, updated_at timestamptz)
              where p.id = c.id and p.id = any($2::uuid[])`,
            [JSON.stringify(changed), changed.map((c) => c.id)],
          );
          // Cannot happen (the rows are locked); thrown, so the transaction rolls back.
          if (res.rowCount !== changed.length) throw new Error(`plan update wrote ${res.rowCount} of ${changed.length} plans`);
        }
        return outcomes;
      }),
    { keyOf: (c) => c.id.toLowerCase() },
  );
}

/** The plan of a settled request, or its DomainError, or the database's error as MikroORM's typed exception. */
async function settle(orm: MikroORM, pending: Promise<Outcome>): Promise<Plan> {
  let outcome: Outcome;
  try {
    outcome = await pending;
  } catch (e) {
    throw typedDatabaseError(orm, e);
  }
  if (!outcome.ok) throw outcome.error;
  return outcome.plan;
}
