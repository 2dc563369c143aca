import { randomUUID } from 'node:crypto';
import { DriverException } from '@mikro-orm/postgresql';
import { describe, expect, it } from 'vitest';
import { DomainError, type QuestionInput } from '@billing/contracts';
import { useMigratedDatabase } from '../../../../tests/support/migrated-database.js';
import { openBillingDatabase } from '../app.js';
import { BillingConfig } from '../config.js';
import { Merchant } from '../merchants/merchant.js';
import { MIGRATIONS } from '../migrations/index.js';
import { Product } from '../products/product.js';
import { Question } from './question.js';
import { listQuestions, QuestionStore, type NewQuestion } from './question-store.js';
import { questionsGrpc } from './questions-grpc.js';

// Create-question's hand-written SQL against a real Postgres: the rows it writes against what
// the ORM wrote for the same questions, default orders under concurrency, scope and validation.

const { orm, rows, storedRows: storedRowsOf } = useMigratedDatabase({
  open: (url) => openBillingDatabase(BillingConfig.parse({ DATABASE_URL: url, DB_POOL_MAX: '25' })),
  schema: 'billing',
  migrations: MIGRATIONS,
});

/** The gRPC call object, which these handlers never read. */
const NO_CALL = undefined as never;

/** A merchant with `n` products. */
async function merchantWithProducts(n = 1) {
  const merchant = Merchant.create({ name: 'Gym', contactEmail: 'ops@gym.example' });
  // Flushed one by one: the entities declare no relation, so the ORM would not order the inserts by foreign key.
  await orm().em.fork().persistAndFlush(merchant);
  const products = Array.from({ length: n }, (_, i) => Product.create({ merchantId: merchant.id, name: `Product ${i}` }));
  await orm().em.fork().persistAndFlush(products);
  return { merchantId: merchant.id, productIds: products.map((p) => p.id), scope: { kind: 'merchant' as const, merchantId: merchant.id } };
}

const input = (q: Partial<QuestionInput> & Pick<QuestionInput, 'text'>): QuestionInput => ({ kind: 'Text', required: false, ...q });

/**
 * The stored row of each question without its id and instants (see `storedRows` of the test
 * database), its options checked against the entity's (whose ids are random) and compared by label.
 */
async function storedRows(questions: Question[]) {
  const stored = await storedRowsOf('billing.questions', questions);
  return stored.map(({ options, ...rest }, i) => {
    expect(options).toEqual(questions[i]!.options);
    return { ...rest, options: (options as { label: string }[]).map((o) => o.label) };
  });
}

describe('listQuestions', () => {
  it('reads a product\'s questions in display order as the ORM loads them; a missing, foreign or malformed product is not found', async () => {
    const { productIds, scope } = await merchantWithProducts(2);
    const store = new QuestionStore(orm());
    const productId = productIds[0]!;
    for (const q of [
      input({ text: 'Any injuries?', required: true, order: 5 }),
      input({ text: `Zoë's "goal" 🏋 \\ {"x":1}?`, kind: 'SingleChoice', options: [{ label: 'Strength' }, { label: 'Cardio "plus"' }], order: -3 }),
      input({ text: 'Days?', kind: 'MultiChoice', options: [{ label: 'Mon' }, { label: 'Tue' }], order: 5 }),
      input({ text: 'Anything else?' }),
    ]) {
      await store.create({ scope, productId, input: q });
    }
    const listed = await listQuestions(orm(), scope, productId.toUpperCase());
    const byOrm = await orm().em.fork().find(Question, { productId }, { orderBy: { order: 'asc', id: 'asc' } });
    expect(listed.map((q) => q.text)).toEqual(byOrm.map((q) => q.text));
    expect(listed.every((q) => q instanceof Question)).toBe(true);
    expect(listed.map((q) => ({ ...q }))).toEqual(byOrm.map((q) => ({ ...q })));
    expect(await listQuestions(orm(), { kind: 'platform' }, productId)).toHaveLength(4);
    expect(await listQuestions(orm(), scope, productIds[1]!)).toEqual([]);

    const other = await merchantWithProducts(1);
    const refusal = (p: Promise<unknown>) => p.then(() => 'answered', (e: DomainError) => `${e.code}: ${e.message}`);
    expect(await refusal(listQuestions(orm(), other.scope, productId))).toBe('not_found: Product not found.');
    expect(await refusal(listQuestions(orm(), scope, randomUUID()))).toBe('not_found: Product not found.');
    expect(await refusal(listQuestions(orm(), scope, 'not-a-uuid'))).toBe('not_found: Not found.');
  });
});

describe('QuestionStore.create', () => {
  it('writes, for creates arriving together, the questions rows the ORM wrote for the same questions, and answers what the ORM then loads', async () => {
    const { productIds, scope } = await merchantWithProducts(4);
    const requests: NewQuestion[] = [
      { scope, productId: productIds[0]!, input: input({ text: 'Any injuries?', required: true }) },
      { scope, productId: productIds[1]!.toUpperCase(), input: input({ text: `Zoë's "goal" 🏋 \\ {"x":1}?`, kind: 'SingleChoice', options: [{ label: 'Strength' }, { label: 'Cardio "plus"' }], order: -3 }) },
      { scope: { kind: 'platform' }, productId: productIds[2]!, input: input({ text: 'Days?', kind: 'MultiChoice', options: [{ label: 'Mon' }, { label: 'Tue' }, { label: 'Wed' }], order: 7 }) },
      { scope, productId: productIds[3]!, input: input({ text: 'Anything else?', order: 0 }) },
    ];
    // The products' next default order is 1, what the ORM path computed for a product without questions.
    const orders = [1, -3, 7, 0];

    // What the ORM path (Question.create and persist in one transaction) wrote ...
    const byOrm = requests.map((r, i) =>
      Question.create({ ...r.input, merchantId: scope.merchantId, productId: r.productId.toLowerCase(), order: orders[i]!, optionLabels: (r.input.options ?? []).map((o) => o.label) }),
    );
    await orm().em.fork().transactional(async (em) => byOrm.forEach((q) => em.persist(q)));
    const ormRows = await storedRows(byOrm);
    await rows(`delete from billing.questions where id in (?)`, [byOrm.map((q) => q.id)]);

    // ... is what the store writes.
    const store = new QuestionStore(orm());
    const byStore = await Promise.all(requests.map((r) => store.create(r)));
    expect(byStore.map((q) => q.order)).toEqual(orders);
    expect(await storedRows(byStore)).toEqual(ormRows);
    const loaded = await orm().em.fork().find(Question, { id: { $in: byStore.map((q) => q.id) } });
    expect(new Map(loaded.map((q) => [q.id, { ...q }]))).toEqual(new Map(byStore.map((q) => [q.id, { ...q }])));
  });

  it('gives concurrent creates on one product distinct, dense orders after its last, across two stores (replicas) whose batches race for the product lock', async () => {
    const { productIds, scope } = await merchantWithProducts(2);
    const replicas = [new QuestionStore(orm()), new QuestionStore(orm())];
    await replicas[0]!.create({ scope, productId: productIds[0]!, input: input({ text: 'Placed', order: 5 }) });
    const created = await Promise.all(
      Array.from({ length: 60 }, (_, i) => replicas[i % 2]!.create({ scope, productId: productIds[i % 3 === 0 ? 1 : 0]!, input: input({ text: `Q${i}?` }) })),
    );
    const ordersOf = (productId: string) => created.filter((q) => q.productId === productId).map((q) => q.order).sort((a, b) => a - b);
    expect(ordersOf(productIds[0]!)).toEqual(Array.from({ length: 40 }, (_, i) => i + 6));
    expect(ordersOf(productIds[1]!)).toEqual(Array.from({ length: 20 }, (_, i) => i + 1));
    for (const productId of productIds) {
      const stored = await rows(`select display_order from billing.questions where product_id = ? and text <> 'Placed' order by display_order`, [productId]);
      expect(stored.map((r) => r.display_order)).toEqual(ordersOf(productId));
    }
  });

  it("answers not_found for a missing product, another merchant's, or a malformed id; a Question.create refusal fails its request alone", async () => {
    const mine = await merchantWithProducts(1);
    const theirs = await merchantWithProducts(1);
    const store = new QuestionStore(orm());
    const ok = input({ text: 'Fine?' });
    const outcomes = await Promise.allSettled([
      store.create({ scope: mine.scope, productId: theirs.productIds[0]!, input: ok }),
      store.create({ scope: mine.scope, productId: randomUUID(), input: ok }),
      store.create({ scope: mine.scope, productId: 'not-a-uuid', input: ok }),
      store.create({ scope: mine.scope, productId: randomUUID(), input: input({ text: 'No options', kind: 'SingleChoice' }) }),
      store.create({ scope: mine.scope, productId: mine.productIds[0]!, input: input({ text: 'No options', kind: 'SingleChoice' }) }),
      store.create({ scope: { kind: 'platform' }, productId: theirs.productIds[0]!, input: ok }),
    ]);
    const answers = outcomes.map((o) => (o.status === 'fulfilled' ? [o.value.merchantId, o.value.order] : [(o.reason as DomainError).code, (o.reason as DomainError).message, (o.reason as DomainError).extensions]));
    const notFound = ['not_found', 'Product not found.', {}];
    expect(answers).toEqual([notFound, notFound, notFound, notFound, ['validation_failed', 'See errors for details.', { errors: { options: ['SingleChoice questions need at least one option.'] } }], [theirs.merchantId, 1]]);
    expect(await rows(`select merchant_id, product_id from billing.questions where merchant_id in (?, ?)`, [mine.merchantId, theirs.merchantId])).toEqual([{ merchant_id: theirs.merchantId, product_id: theirs.productIds[0] }]);
  });

  it("fails only the question the database refuses, with the ORM's exception; the questions beside it commit", async () => {
    const { productIds, scope } = await merchantWithProducts(3);
    const store = new QuestionStore(orm());
    const outcomes = await Promise.allSettled([
      store.create({ scope, productId: productIds[0]!, input: input({ text: 'a' }) }),
      store.create({ scope, productId: productIds[1]!, input: input({ text: 'x'.repeat(1001) }) }),
      store.create({ scope, productId: productIds[2]!, input: input({ text: 'b' }) }),
    ]);
    expect(outcomes.map((o) => o.status)).toEqual(['fulfilled', 'rejected', 'fulfilled']);
    expect((outcomes[1] as PromiseRejectedResult).reason).toBeInstanceOf(DriverException);
    expect(((outcomes[1] as PromiseRejectedResult).reason as DriverException).code).toBe('23514');
    expect(await rows(`select text from billing.questions where product_id in (?) order by text`, [productIds])).toEqual([{ text: 'a' }, { text: 'b' }]);
  });
});

describe('CreateQuestion', () => {
  it('answers the stored question through gRPC, and refuses invalid input before looking for the product', async () => {
    const { productIds, merchantId } = await merchantWithProducts(1);
    const scope = { kind: 'merchantId' as const, merchantId };
    const questions = questionsGrpc(orm());
    const created = await questions.CreateQuestion({ scope, productId: productIds[0]!, text: 'Goal?', kind: 'SingleChoice', required: true, optionLabels: ['Strength', 'Cardio'] }, NO_CALL);
    expect(created).toMatchObject({ productId: productIds[0], merchantId, text: 'Goal?', kind: 'SingleChoice', required: true, order: 1, options: [{ label: 'Strength' }, { label: 'Cardio' }] });
    expect(await questions.GetQuestion({ scope, productId: productIds[0]!, id: created.id }, NO_CALL)).toEqual(created);
    const refused = await questions.CreateQuestion({ scope, productId: randomUUID(), text: 'Goal?', kind: 'Text', required: false, optionLabels: ['x'] }, NO_CALL).catch((e: unknown) => e);
    expect([(refused as DomainError).code, (refused as DomainError).extensions.errors]).toEqual(['validation_failed', { options: ['Text questions have no options.'] }]);
  });
});
