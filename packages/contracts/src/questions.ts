import { z } from 'zod';
import { DateTime, NonBlankText, Uuid } from './common.js';

/** Onboarding questions of a product, answered by members when they sign up. */
export const QUESTION_KINDS = ['Text', 'SingleChoice', 'MultiChoice'] as const;
export type QuestionKind = (typeof QUESTION_KINDS)[number];

export const INT32_MIN = -2_147_483_648;
export const INT32_MAX = 2_147_483_647;
const Int32 = z.number().int('Must be a whole number.').min(INT32_MIN).max(INT32_MAX);

/** Most options a choice question may have. */
export const MAX_QUESTION_OPTIONS = 50;

export const QuestionOption = z.object({ id: Uuid, label: z.string() }).meta({ id: 'QuestionOption' });
export type QuestionOption = z.infer<typeof QuestionOption>;

export const Question = z
  .object({
    id: Uuid,
    productId: Uuid,
    text: z.string(),
    kind: z.enum(QUESTION_KINDS),
    required: z.boolean(),
    /** Display position; the list is ordered by `order`, then `id`. */
    order: z.number().int(),
    options: z.array(QuestionOption),
    createdAt: DateTime,
  })
  .meta({ id: 'Question' });
export type Question = z.infer<typeof Question>;

/**
 * Choice questions need at least one option (labels unique, case-insensitively); Text questions
 * have none. `order` defaults to after the product's last question.
 */
/** A question's own fields, as the billing service takes them (the merchant is the call's scope). */
const QuestionFields = z.object({
  productId: Uuid.nullish(),
  text: NonBlankText(1000),
  kind: z.enum(QUESTION_KINDS),
  required: z.boolean(),
  order: Int32.nullish(),
  options: z
    .array(z.object({ label: NonBlankText(200) }))
    .max(MAX_QUESTION_OPTIONS)
    .nullish(),
});

function checkOptions(q: z.infer<typeof QuestionFields>, ctx: z.RefinementCtx): void {
  const options = q.options ?? [];
  if (q.kind === 'Text' && options.length > 0) ctx.addIssue({ code: 'custom', path: ['options'], message: 'Text questions have no options.' });
  if (q.kind !== 'Text' && options.length === 0) ctx.addIssue({ code: 'custom', path: ['options'], message: `${q.kind} questions need at least one option.` });
  const seen = new Set<string>();
  options.forEach((o, i) => {
    const key = o.label.toLowerCase();
    if (seen.has(key)) ctx.addIssue({ code: 'custom', path: ['options', i, 'label'], message: 'Option labels must be unique.' });
    seen.add(key);
  });
}

/** A new question as the billing service validates it. */
export const QuestionInput = QuestionFields.superRefine(checkOptions);
export type QuestionInput = z.infer<typeof QuestionInput>;

/** `POST /api/Products/{productId}/questions`: merchantId, text, kind and required are required. */
export const CreateQuestionRequest = QuestionFields.extend({ merchantId: Uuid })
  .superRefine(checkOptions)
  .meta({
    id: 'CreateQuestionRequest',
    // checkOptions, said in the document: a Text question has no options, a choice question at least one.
    allOf: [
      { if: { properties: { kind: { const: 'Text' } }, required: ['kind'] }, then: { properties: { options: { anyOf: [{ type: 'null' }, { type: 'array', items: { type: 'object' }, maxItems: 0 }] } } } },
      { if: { properties: { kind: { enum: ['SingleChoice', 'MultiChoice'] } }, required: ['kind'] }, then: { required: ['options'], properties: { options: { type: 'array', items: { type: 'object' }, minItems: 1 } } } },
    ],
  });
export type CreateQuestionRequest = z.infer<typeof CreateQuestionRequest>;

/**
 * Bulk display-order update: each listed question gets its `order`; questions not listed keep
 * theirs. Every id must be a question of the product in the path, listed once.
 */
export const ReorderQuestionsRequest = z
  .object({
    productId: Uuid.nullish(),
    orders: z
      .array(z.object({ id: Uuid, order: Int32 }), { error: (iss) => (iss.code === 'invalid_type' ? 'Required: an array of { id, order }.' : undefined) })
      .min(1, 'At least one item is required.')
      .max(1000, 'At most 1000 items.')
      .superRefine((orders, ctx) => {
        const seen = new Set<string>();
        orders.forEach((o, i) => {
          const id = o.id.toLowerCase();
          if (seen.has(id)) ctx.addIssue({ code: 'custom', path: [i, 'id'], message: 'Each question may be listed only once.' });
          seen.add(id);
        });
      }),
  })
  .meta({ id: 'ReorderQuestionsRequest' });
export type ReorderQuestionsRequest = z.infer<typeof ReorderQuestionsRequest>;
