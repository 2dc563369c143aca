import { requireScope, type ServiceImpl } from '@billing/service-runtime';
import { LockMode, type MikroORM } from '@mikro-orm/postgresql';
import { DomainError, QuestionInput, parseOrThrow } from '@billing/contracts';
import { scopedTo } from '../merchant-scope.js';
import { findProduct } from '../products/products-grpc.js';
import { Question } from './question.js';
import { applyQuestionOrder } from './question-order.js';
import { listQuestions, QuestionStore } from './question-store.js';

export function questionsGrpc(orm: MikroORM): ServiceImpl<'billing.v1.Questions'> {
  const store = new QuestionStore(orm);
  return {
    CreateQuestion: async (req) => {
      const scope = requireScope(req.scope);
      const input = parseOrThrow(QuestionInput, {
        text: req.text,
        kind: req.kind,
        required: req.required,
        order: req.order,
        options: req.kind === 'Text' && !req.optionLabels.length ? undefined : req.optionLabels.map((label) => ({ label })),
      });
      return (await store.create({ scope, productId: req.productId, input })).toMessage();
    },

    GetQuestion: async (req) => {
      const question = await orm.em.fork().findOne(Question, scopedTo(requireScope(req.scope), { id: req.id }));
      if (!question || question.productId !== req.productId.toLowerCase()) throw new DomainError('not_found', 'Question not found.');
      return question.toMessage();
    },

    ListQuestions: async (req) => ({ items: (await listQuestions(orm, requireScope(req.scope), req.productId)).map((q) => q.toMessage()) }),

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
