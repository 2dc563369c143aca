import { GroupWrite, queryRows, requireScope, type CallScope, type ServiceImpl } from '@billing/service-runtime';
import { LockMode, type EntityManager, type MikroORM } from '@mikro-orm/postgresql';
import { CreateQuestionRequest, DomainError, parseOrThrow } from '@billing/contracts';
import { findManyById, pickScoped, scopedTo } from '../merchant-scope.js';
import { Product } from '../products/product.js';
import { findProduct } from '../products/products-grpc.js';
import { compareQuestions, Question } from './question.js';
import { applyQuestionOrder } from './question-order.js';

interface NewQuestion {
  scope: CallScope;
  productId: string;
  input: CreateQuestionRequest;
}

interface Loaded {
  products: Map<string, Product>;
  /** Highest display order of each product's questions (absent: none yet). */
  lastOrder: Map<string, number>;
}

export function questionsGrpc(orm: MikroORM): ServiceImpl<'billing.v1.Questions'> {
  /**
   * Group-committed under the products' row locks, so concurrent creates append distinct
   * default orders; creates for one product never share a batch.
   */
  const creates = new GroupWrite(
    orm,
    {
      load: async (em: EntityManager, items: readonly NewQuestion[]): Promise<Loaded> => {
        const products = await findManyById(em, Product, items.map((q) => q.productId), { lock: true });
        const ids = [...products.keys()];
        // The highest order per product, one grouped query for the batch instead of one per product.
        const last = ids.length
          ? await queryRows<{ product_id: string; last: number }>(em, 'select product_id, max(display_order)::int as last from questions where product_id = any(?::uuid[]) group by product_id', [`{${ids.join(',')}}`])
          : [];
        return { products, lastOrder: new Map(last.map((r) => [r.product_id, r.last])) };
      },
      apply: (em: EntityManager, { scope, productId, input }: NewQuestion, { products, lastOrder }: Loaded) => {
        const product = pickScoped(products, scope, productId, 'Product');
        const question = Question.create({
          merchantId: product.merchantId,
          productId: product.id,
          text: input.text,
          kind: input.kind,
          required: input.required,
          order: input.order ?? (lastOrder.get(product.id) ?? 0) + 1,
          optionLabels: (input.options ?? []).map((o) => o.label),
        });
        em.persist(question);
        return question.toMessage();
      },
    },
    { keyOf: (q) => q.productId.toLowerCase() },
  );
  return {
    CreateQuestion: async (req) => {
      const scope = requireScope(req.scope);
      const input = parseOrThrow(CreateQuestionRequest, {
        text: req.text,
        kind: req.kind,
        required: req.required,
        order: req.order,
        options: req.kind === 'Text' && !req.optionLabels.length ? undefined : req.optionLabels.map((label) => ({ label })),
      });
      return creates.run({ scope, productId: req.productId, input });
    },

    GetQuestion: async (req) => {
      const question = await orm.em.fork().findOne(Question, scopedTo(requireScope(req.scope), { id: req.id }));
      if (!question || question.productId !== req.productId.toLowerCase()) throw new DomainError('not_found', 'Question not found.');
      return question.toMessage();
    },

    ListQuestions: async (req) => {
      const scope = requireScope(req.scope);
      const em = orm.em.fork();
      const product = await findProduct(em, scope, req.productId);
      const items = await em.find(Question, { productId: product.id }, { orderBy: { order: 'asc', id: 'asc' } });
      return { items: items.sort(compareQuestions).map((q) => q.toMessage()) };
    },

    ReorderQuestions: async (req) => {
      const scope = requireScope(req.scope);
      await orm.em.fork().transactional(async (em) => {
        const product = await findProduct(em, scope, req.productId);
        const questions = await em.find(Question, { productId: product.id }, { lockMode: LockMode.PESSIMISTIC_WRITE });
        applyQuestionOrder(questions, req.orders);
      });
      return {};
    },
  };
}
