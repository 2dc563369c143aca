import { z } from 'zod';
import { CreateQuestionRequest, PathId, Question, QUESTION_KINDS, ReorderQuestionsRequest } from '@billing/contracts';
import type { MerchantAccess } from '../auth/access.js';
import { callScope, merchantCallScope } from '../auth/call-scope.js';
import type { Backends } from '../backends/clients.js';
import { created, defineRoute, noContent, ok, type RouteSpec } from '../http/route.js';
import { assertSameId, oneOf } from '../http/views.js';
import type { Question__Output } from '@billing/proto-types/billing/v1/Question';

export function toQuestion(q: Question__Output): Question {
  return {
    id: q.id,
    productId: q.productId,
    text: q.text,
    kind: oneOf(QUESTION_KINDS, q.kind, 'kind'),
    required: q.required,
    order: q.order,
    options: q.options.map((o) => ({ id: o.id, label: o.label })),
    createdAt: q.createdAt,
  };
}

const ProductParams = z.object({ productId: PathId });

export function questionRoutes(backends: Backends, access: MerchantAccess): RouteSpec[] {
  const questions = backends.billing.questions;
  return [
    defineRoute({
      method: 'POST',
      url: '/api/Products/:productId/questions',
      tag: 'Questions',
      summary: 'Add an onboarding question to a product',
      description:
        'kind Text has no options; SingleChoice and MultiChoice need at least one (labels unique, at most 50). `order` defaults to after the product\'s last question (the first is 1). Unknown product, or a product of another merchant: 404.',
      auth: { merchant: 'Admin' },
      params: ProductParams,
      body: CreateQuestionRequest,
      responses: { 201: Question, 400: null, 403: null, 404: null },
      handler: async ({ params, body, principal }) => {
        assertSameId('productId', body.productId, params.productId);
        const question = toQuestion(
          await questions.CreateQuestion({
            scope: await callScope(access, principal, body.merchantId),
            productId: params.productId,
            text: body.text,
            kind: body.kind,
            required: body.required,
            order: body.order ?? undefined,
            optionLabels: (body.options ?? []).map((o) => o.label),
          }),
        );
        return created(question, `/api/Products/${question.productId}/questions/${question.id}`);
      },
    }),
    defineRoute({
      method: 'GET',
      url: '/api/Products/:productId/questions',
      tag: 'Questions',
      summary: "List a product's questions in display order",
      description: 'A plain array ordered by `order`, then id.',
      auth: { merchant: 'Viewer' },
      params: ProductParams,
      responses: { 200: z.array(Question), 404: null },
      handler: async ({ params, principal }) => {
        const res = await questions.ListQuestions({ scope: await callScope(access, principal), productId: params.productId });
        return ok(res.items.map(toQuestion));
      },
    }),
    defineRoute({
      method: 'GET',
      url: '/api/Products/:productId/questions/:id',
      tag: 'Questions',
      summary: 'Read a question',
      auth: { merchant: 'Viewer' },
      params: ProductParams.extend({ id: PathId }),
      responses: { 200: Question, 404: null },
      handler: async ({ params, principal }) =>
        ok(toQuestion(await questions.GetQuestion({ scope: await callScope(access, principal), productId: params.productId, id: params.id }))),
    }),
    defineRoute({
      method: 'POST',
      url: '/api/Products/:productId/questions/reorder',
      tag: 'Questions',
      summary: 'Bulk update of question display order',
      description:
        'Each listed question gets its `order`; questions not listed keep theirs. 404 when the product does not exist (or is another merchant\'s) and when an id is not a question of the product (naming each such `orders[i].id`); 400 when `orders` is empty, when an id is listed twice (naming `orders[i].id`), or when the body productId differs from the path. All or nothing.',
      auth: { merchant: 'Admin' },
      params: ProductParams,
      body: ReorderQuestionsRequest,
      responses: { 204: null, 400: null, 404: null },
      handler: async ({ params, body, principal }) => {
        assertSameId('productId', body.productId, params.productId);
        await questions.ReorderQuestions({ scope: await callScope(access, principal), productId: params.productId, orders: body.orders });
        return noContent();
      },
    }),
  ];
}
