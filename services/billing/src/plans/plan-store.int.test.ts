import { randomUUID } from 'node:crypto';
import { DriverException } from '@mikro-orm/postgresql';
import { describe, expect, it } from 'vitest';
import { DomainError } from '@billing/contracts';
import { MAX_MINOR_UNITS } from '@billing/money';
import { useMigratedDatabase } from '../../../../tests/support/migrated-database.js';
import { openBillingDatabase } from '../app.js';
import { BillingConfig } from '../config.js';
import { Merchant } from '../merchants/merchant.js';
import { MIGRATIONS } from '../migrations/index.js';
import { Product } from '../products/product.js';
import { Plan } from './plan.js';
import { loadPlans, PlanStore, type NewPlan } from './plan-store.js';
import { plansGrpc } from './plans-grpc.js';

// Create-plan's and update-plan's hand-written SQL against a real Postgres: the rows they write
// against what the ORM wrote for the same plans, scope, validation and concurrent updates.

const { orm, rows, storedRows: storedRowsOf } = useMigratedDatabase({
  open: (url) => openBillingDatabase(BillingConfig.parse({ DATABASE_URL: url, DB_POOL_MAX: '25' })),
  schema: 'billing',
  migrations: MIGRATIONS,
});

/** The gRPC call object, which these handlers never read. */
const NO_CALL = undefined as never;

/** A merchant with one product; `scope` is its gRPC scope. */
async function merchantWithProduct() {
  const merchant = Merchant.create({ name: 'Gym', contactEmail: 'ops@gym.example' });
  const product = Product.create({ merchantId: merchant.id, name: 'Membership' });
  // Flushed one by one: the entities declare no relation, so the ORM would not order the inserts by foreign key.
  await orm().em.fork().persistAndFlush(merchant);
  await orm().em.fork().persistAndFlush(product);
  return { merchantId: merchant.id, productId: product.id, scope: { kind: 'merchantId' as const, merchantId: merchant.id } };
}

/** Plans with every column varied (a store that swapped two columns would be seen), names that need escaping in JSON. */
function newPlans(merchantId: string, productId: string): NewPlan[] {
  return [
    { merchantId, productId, name: 'Monthly', amountMinor: 1995, currency: 'AUD', interval: 'Month', intervalCount: 1, trialDays: 0, isActive: true },
    { merchantId, productId: productId.toUpperCase(), name: `Zoë's "yearly" 🏋 \\ {"x":1}`, amountMinor: MAX_MINOR_UNITS, currency: 'NZD', interval: 'Year', intervalCount: 2, trialDays: 365, isActive: false },
    { merchantId, productId, name: ' Weekly ', amountMinor: 1, currency: 'USD', interval: 'Week', intervalCount: 52, trialDays: 14, isActive: true },
    { merchantId, productId, name: 'Fortnightly', amountMinor: 4_000, currency: 'AUD', interval: 'Fortnight', intervalCount: 3, trialDays: 7, isActive: false },
  ];
}

/** The stored row of each plan, without its id and instants (see `storedRows` of the test database). */
const storedRows = (plans: Plan[]) => storedRowsOf('billing.plans', plans);

/** Every property of the entity, as the ORM loads it. */
const fieldsOf = (p: Plan) => ({ ...p });

describe('PlanStore.create', () => {
  it('writes, for creates arriving together, the plans rows the ORM wrote for the same plans, and answers what the ORM then loads', async () => {
    const { merchantId, productId } = await merchantWithProduct();
    const inputs = newPlans(merchantId, productId);

    // What the ORM path (Plan.create and persist in one transaction) wrote ...
    const byOrm = inputs.map((input) => Plan.create({ ...input, productId: input.productId.toLowerCase() }));
    await orm().em.fork().transactional(async (em) => byOrm.forEach((p) => em.persist(p)));
    const ormRows = await storedRows(byOrm);

    // ... is what the store writes.
    const store = new PlanStore(orm());
    const byStore = await Promise.all(inputs.map((input) => store.create(input)));
    expect(await storedRows(byStore)).toEqual(ormRows);
    const loaded = await orm().em.fork().find(Plan, { id: { $in: byStore.map((p) => p.id) } });
    expect(new Map(loaded.map((p) => [p.id, fieldsOf(p)]))).toEqual(new Map(byStore.map((p) => [p.id, fieldsOf(p)])));
    expect(byStore.every((p) => p.productId === productId && p.merchantId === merchantId)).toBe(true);
  });

  it("answers not_found for a missing product, another merchant's, or a malformed id, before any validation error, and commits the plans beside them", async () => {
    const mine = await merchantWithProduct();
    const theirs = await merchantWithProduct();
    const store = new PlanStore(orm());
    const valid = newPlans(mine.merchantId, mine.productId)[0]!;
    const invalid = { ...valid, amountMinor: 0, currency: 'XXX', interval: 'Day', intervalCount: 53, trialDays: -1, name: '  ' };
    const requests: NewPlan[] = [
      { ...valid, name: 'first' },
      { ...valid, productId: theirs.productId },
      { ...valid, productId: randomUUID() },
      { ...valid, productId: 'not-a-uuid' },
      { ...invalid, productId: theirs.productId },
      { ...invalid, productId: randomUUID() },
      { ...invalid, productId: 'not-a-uuid' },
      invalid,
      { ...valid, amountMinor: 1.5 },
      { ...valid, name: 'last' },
    ];
    const outcomes = await Promise.allSettled(requests.map((r) => store.create(r)));
    const answers = outcomes.map((o) => (o.status === 'fulfilled' ? o.value.name : { code: (o.reason as DomainError).code, message: (o.reason as DomainError).message }));
    const notFound = { code: 'not_found', message: 'Product not found.' };
    const invalidPlan = { code: 'validation_failed', message: 'See errors for details.' };
    expect(answers).toEqual(['first', notFound, notFound, notFound, notFound, notFound, notFound, invalidPlan, invalidPlan, 'last']);
    expect(((outcomes[7] as PromiseRejectedResult).reason as DomainError).extensions).toEqual({
      errors: {
        amount: ['Must be greater than zero.'],
        currency: ['Must be a supported ISO 4217 currency code.'],
        interval: ['Must be one of Week, Fortnight, Month, Year.'],
        intervalCount: ['Must be between 1 and 52.'],
        trialDays: ['Must be between 0 and 365.'],
        name: ['Must not be empty.'],
      },
    });
    expect(await rows(`select name from billing.plans where merchant_id in (?, ?) order by name`, [mine.merchantId, theirs.merchantId])).toEqual([{ name: 'first' }, { name: 'last' }]);
  });

  it("fails only the plan the database refuses, with the ORM's exception; the plans beside it commit", async () => {
    const { merchantId, productId } = await merchantWithProduct();
    const store = new PlanStore(orm());
    const valid = newPlans(merchantId, productId)[0]!;
    const outcomes = await Promise.allSettled([{ ...valid, name: 'a' }, { ...valid, name: 'x'.repeat(201) }, { ...valid, name: 'b' }].map((r) => store.create(r)));
    expect(outcomes.map((o) => o.status)).toEqual(['fulfilled', 'rejected', 'fulfilled']);
    const error = (outcomes[1] as PromiseRejectedResult).reason;
    expect(error).toBeInstanceOf(DriverException);
    expect((error as DriverException).code).toBe('22001');
    expect(await rows(`select name from billing.plans where merchant_id = ? order by name`, [merchantId])).toEqual([{ name: 'a' }, { name: 'b' }]);
  });
});

describe('PlanStore.update', () => {
  it('writes the row the ORM wrote for the same change, and answers what the ORM then loads', async () => {
    const { merchantId, productId } = await merchantWithProduct();
    const store = new PlanStore(orm());
    const [viaOrm, viaStore] = await Promise.all([0, 1].map(() => store.create(newPlans(merchantId, productId)[1]!)));
    const now = new Date();

    // What the ORM path (a locked load, plan.update, flush) wrote ...
    await orm().em.fork().transactional(async (em) => {
      const plan = await em.findOneOrFail(Plan, { id: viaOrm!.id });
      plan.update({ name: 'Renamed "plan" ✓', isActive: true }, now);
    });
    const ormPlan = await orm().em.fork().findOneOrFail(Plan, { id: viaOrm!.id });

    // ... is what the store writes.
    const updated = await store.update({ scope: { kind: 'merchant', merchantId }, id: viaStore!.id.toUpperCase(), name: 'Renamed "plan" ✓', isActive: true });
    const storePlan = await orm().em.fork().findOneOrFail(Plan, { id: viaStore!.id });
    expect(fieldsOf(storePlan)).toEqual(fieldsOf(updated));
    expect(await storedRows([updated])).toEqual(await storedRows([ormPlan]));
    expect(updated.createdAt).toEqual(viaStore!.createdAt);
    expect(updated.updatedAt.getTime()).toBeGreaterThanOrEqual(now.getTime());

    // Absent fields are unchanged; the instant of the change is still recorded.
    const untouched = await store.update({ scope: { kind: 'merchant', merchantId }, id: viaStore!.id, name: null });
    expect([untouched.name, untouched.isActive]).toEqual(['Renamed "plan" ✓', true]);
    expect(untouched.updatedAt.getTime()).toBeGreaterThanOrEqual(updated.updatedAt.getTime());
    expect(fieldsOf(await orm().em.fork().findOneOrFail(Plan, { id: viaStore!.id }))).toEqual(fieldsOf(untouched));
  });

  it("answers not_found for a missing plan, another merchant's, or a malformed id, and a validation error for a blank name; the platform updates any merchant's", async () => {
    const mine = await merchantWithProduct();
    const theirs = await merchantWithProduct();
    const store = new PlanStore(orm());
    const [plan, other] = await Promise.all([store.create(newPlans(mine.merchantId, mine.productId)[0]!), store.create(newPlans(theirs.merchantId, theirs.productId)[0]!)]);
    const scope = { kind: 'merchant' as const, merchantId: mine.merchantId };
    const outcomes = await Promise.allSettled([
      store.update({ scope, id: other!.id, name: 'stolen' }),
      store.update({ scope, id: randomUUID(), name: 'x' }),
      store.update({ scope, id: 'not-a-uuid', name: 'x' }),
      store.update({ scope, id: plan!.id, name: ' ' }),
      store.update({ scope: { kind: 'platform' }, id: other!.id, isActive: false }),
    ]);
    const answers = outcomes.map((o) => (o.status === 'fulfilled' ? [o.value.name, o.value.isActive] : [(o.reason as DomainError).code, (o.reason as DomainError).message, (o.reason as DomainError).extensions]));
    expect(answers).toEqual([
      ['not_found', 'Plan not found.', {}],
      ['not_found', 'Plan not found.', {}],
      ['not_found', 'Plan not found.', {}],
      ['validation_failed', 'See errors for details.', { errors: { name: ['Must not be empty.'] } }],
      ['Monthly', false],
    ]);
    expect(await rows(`select merchant_id, name, is_active from billing.plans where id in (?, ?) order by merchant_id = ?`, [plan!.id, other!.id, theirs.merchantId])).toEqual([
      { merchant_id: mine.merchantId, name: 'Monthly', is_active: true },
      { merchant_id: theirs.merchantId, name: 'Monthly', is_active: false },
    ]);
  });

  it('serializes concurrent updates of one plan, across two stores (replicas): each answer is the row as its update left it, the last one stored', async () => {
    const { merchantId, productId } = await merchantWithProduct();
    const replicas = [new PlanStore(orm()), new PlanStore(orm())];
    const plan = await replicas[0]!.create(newPlans(merchantId, productId)[0]!);
    const scope = { kind: 'merchant' as const, merchantId };
    // Each update sets both fields, so an answer that is not the row its own update left behind would be seen.
    const answers = await Promise.all(Array.from({ length: 30 }, (_, i) => replicas[i % 2]!.update({ scope, id: plan.id, name: `name ${i}`, isActive: i % 3 === 0 })));
    answers.forEach((a, i) => expect([a.name, a.isActive]).toEqual([`name ${i}`, i % 3 === 0]));
    const [stored] = await rows(`select name, is_active, (extract(epoch from updated_at) * 1000)::bigint as updated from billing.plans where id = ?`, [plan.id]);
    // The last update applied has the latest updatedAt; two may share its millisecond, and then
    // the row is one of theirs.
    const latest = Math.max(...answers.map((a) => a.updatedAt.getTime()));
    const last = answers.filter((a) => a.updatedAt.getTime() === latest).map((a) => [a.name, a.isActive, latest]);
    expect(last).toContainEqual([stored!.name, stored!.is_active, Number(stored!.updated)]);
  });
});

describe('loadPlans', () => {
  it('reads each plan as the ORM loads it, every property and type; malformed and missing ids find nothing', async () => {
    const { merchantId, productId } = await merchantWithProduct();
    const store = new PlanStore(orm());
    const created = await Promise.all(newPlans(merchantId, productId).map((p) => store.create(p)));
    const ids = created.map((p) => p.id);
    const loaded = await loadPlans(orm(), [...ids.map((id) => id.toUpperCase()), 'not-a-uuid', randomUUID()]);
    expect([...loaded.keys()].sort()).toEqual([...ids].sort());
    for (const id of ids) {
      const byOrm = await orm().em.fork().findOneOrFail(Plan, { id });
      expect(loaded.get(id)).toBeInstanceOf(Plan);
      expect(fieldsOf(loaded.get(id)!)).toEqual(fieldsOf(byOrm));
    }
    expect(await loadPlans(orm(), ['not-a-uuid'])).toEqual(new Map());
  });
});

describe('CreatePlan and UpdatePlan', () => {
  it('answer the stored plan through gRPC, amounts as decimal strings of minor units', async () => {
    const { productId, scope } = await merchantWithProduct();
    const plans = plansGrpc(orm());
    const created = await plans.CreatePlan({ scope, productId, name: 'Monthly', amountMinor: '1995', currency: 'AUD', interval: 'Month', intervalCount: 1, trialDays: 0, isActive: true }, NO_CALL);
    expect(created).toMatchObject({ productId, name: 'Monthly', amountMinor: '1995', currency: 'AUD', interval: 'Month', isActive: true });
    const updated = await plans.UpdatePlan({ scope, id: created.id, name: 'Monthly plus', isActive: undefined }, NO_CALL);
    expect(updated).toEqual({ ...created, name: 'Monthly plus', updatedAt: updated.updatedAt });
    expect(await plans.GetPlan({ scope, id: created.id }, NO_CALL)).toEqual(updated);
    const tooPrecise = await plans.CreatePlan({ scope, productId, name: 'Huge', amountMinor: '9007199254740993', currency: 'AUD', interval: 'Month', intervalCount: 1, trialDays: 0, isActive: true }, NO_CALL).catch((e: unknown) => e);
    expect((tooPrecise as DomainError).code).toBe('validation_failed');
  });
});
