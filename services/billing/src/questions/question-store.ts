import type { MikroORM } from '@mikro-orm/postgresql';
import { distinctUuids, DomainError, isUuidText, type QuestionInput } from '@billing/contracts';
import { Batcher, decideItem, queryPrepared, transactPrepared, typedDatabaseError, type CallScope } from '@billing/service-runtime';
import { compareQuestions, Question, type QuestionOption } from './question.js';

/** A `questions` row as `to_jsonb` gives it (instants in ISO 8601). */
interface QuestionRow {
  id: string;
  merchant_id: string;
  product_id: string;
  text: string;
  kind: Question['kind'];
  required: boolean;
  display_order: number;
  options: QuestionOption[];
  created_at: string;
  updated_at: string;
}

function questionOfRow(r: QuestionRow): Question {
  return Object.assign(new Question(), {
    id: r.id,
    merchantId: r.merchant_id,
    productId: r.product_id,
    text: r.text,
    kind: r.kind,
    required: r.required,
    order: r.display_order,
    options: r.options,
    createdAt: new Date(r.created_at),
    updatedAt: new Date(r.updated_at),
  });
}

/**
 * The questions of a product in display order (`compareQuestions`): one prepared statement that
 * reads the product (for the scope check) with its questions, hand-mapped as the ORM loads them,
 * where the ORM spent two reads. A product that is missing or, for a merchant scope, another
 * merchant's is `Product not found.` (a malformed id `Not found.`), as `findProduct` answers. Onboarding validates every
 * completion against these.
 */
export async function listQuestions(orm: MikroORM, scope: CallScope, productId: string): Promise<Question[]> {
  if (!isUuidText(productId)) throw new DomainError('not_found', 'Not found.');
  const { rows } = await queryPrepared<{ merchant_id: string; questions: QuestionRow[] }>(
    orm,
    'questions_of_product',
    `select p.merchant_id, coalesce((select json_agg(to_jsonb(q)) from questions q where q.product_id = p.id), '[]') as questions
       from products p where p.id = $1`,
    [productId.toLowerCase()],
  );
  const [product] = rows;
  if (!product || (scope.kind === 'merchant' && product.merchant_id !== scope.merchantId)) throw new DomainError('not_found', 'Product not found.');
  return product.questions.map(questionOfRow).sort(compareQuestions);
}

/** A question to create for a product, addressed by id inside the call's scope. */
export interface NewQuestion {
  scope: CallScope;
  productId: string;
  input: QuestionInput;
}

type Outcome = { ok: true; question: Question } | { ok: false; error: DomainError };

/**
 * Persistence of create-question, group-committed in hand-written SQL instead of an ORM
 * transaction per batch, because on this path the round trips and the ORM cost more than the SQL
 * they carry. The creates that arrive together share one transaction of two statements: a
 * locking read of their products (in id order, so concurrent batches cannot deadlock), then one
 * insert that appends each defaulted question after its product's last. Creates for one product
 * never share a batch, and a later batch waits for the product's lock, so concurrent creates get
 * distinct orders. The rows written are the ones the ORM wrote, every column
 * (`question-store.int.test.ts` holds it to that); creating a question has no event.
 */
export class QuestionStore {
  constructor(private readonly orm: MikroORM) {}

  /**
   * Creates a question of a product: one that is missing or, for a merchant scope, another
   * merchant's is `Product not found.`. A DomainError of `Question.create` is this request's
   * answer; a database error leaves as MikroORM's typed exception, failing this request alone.
   */
  async create(req: NewQuestion): Promise<Question> {
    let outcome: Outcome;
    try {
      outcome = await this.creates.submit(req);
    } catch (e) {
      throw typedDatabaseError(this.orm, e);
    }
    if (!outcome.ok) throw outcome.error;
    return outcome.question;
  }

  private readonly creates = new Batcher<NewQuestion, Outcome>(
    (batch) =>
      transactPrepared(this.orm, async (query) => {
        const ids = distinctUuids(batch.map((q) => q.productId));
        const { rows } = ids.length === 0 ? { rows: [] } : await query<{ id: string; merchant_id: string }>('question_create_lock', `select id, merchant_id from products where id = any($1::uuid[]) order by id for update`, [ids]);
        const products = new Map(rows.map((p) => [p.id, p]));
        const outcomes: Outcome[] = [];
        /** The questions to insert, each with the order its request asked for (null: after the product's last). */
        const created: { question: Question; order: number | null }[] = [];
        for (const { scope, productId, input } of batch) {
          const product = isUuidText(productId) ? products.get(productId.toLowerCase()) : undefined;
          if (!product || (scope.kind === 'merchant' && product.merchant_id !== scope.merchantId)) {
            outcomes.push({ ok: false, error: new DomainError('not_found', 'Product not found.') });
            continue;
          }
          const decided = decideItem(() =>
            Question.create({
              merchantId: product.merchant_id,
              productId: product.id,
              text: input.text,
              kind: input.kind,
              required: input.required,
              // A defaulted order is set from the insert, which reads the product's last under its lock.
              order: input.order ?? 0,
              optionLabels: (input.options ?? []).map((o) => o.label),
            }),
          );
          if (!decided.ok) {
            outcomes.push(decided);
            continue;
          }
          created.push({ question: decided.value, order: input.order ?? null });
          outcomes.push({ ok: true, question: decided.value });
        }
        if (created.length === 0) return outcomes;
        const values = created.map(({ question: q, order }, seq) => ({
          seq,
          id: q.id,
          merchant_id: q.merchantId,
          product_id: q.productId,
          text: q.text,
          kind: q.kind,
          required: q.required,
          display_order: order,
          options: q.options,
          created_at: q.createdAt.toISOString(),
          updated_at: q.updatedAt.toISOString(),
        }));
        // The last order is read here, not with the lock: this statement's snapshot is taken once the
        // locks are held, so it sees the questions a batch that held them before has committed.
        const res = await query<{ id: string; display_order: number }>(
          'question_create_insert',
          `insert into questions (id, merchant_id, product_id, text, kind, required, display_order, options, created_at, updated_at)
           select q.id, q.merchant_id, q.product_id, q.text, q.kind, q.required,
                  coalesce(q.display_order, (select coalesce(max(x.display_order), 0) + 1 from questions x where x.product_id = q.product_id)),
                  q.options, q.created_at, q.updated_at
             from jsonb_to_recordset($1::jsonb) as q(seq int, id uuid, merchant_id uuid, product_id uuid, text text, kind text, required boolean,
                    display_order int, options jsonb, created_at timestamptz, updated_at timestamptz)
            order by q.seq
           returning id, display_order`,
          [JSON.stringify(values)],
        );
        const orders = new Map(res.rows.map((r) => [r.id, r.display_order]));
        for (const { question } of created) question.order = orders.get(question.id)!;
        return outcomes;
      }),
    { keyOf: (q) => q.productId.toLowerCase() },
  );
}
