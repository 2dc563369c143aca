import { EntitySchema } from '@mikro-orm/postgresql';
import { DomainError, type FieldErrors } from '@billing/contracts';
import type { Question } from '../questions/question.js';

/** A member's answer to one onboarding question of a product: text, or chosen option ids. */
export class MemberAnswer {
  memberId!: string;
  questionId!: string;
  merchantId!: string;
  productId!: string;
  textValue: string | null = null;
  optionIds: string[] = [];
  updatedAt: Date = new Date();
}

export interface AnswerInput {
  questionId: string;
  textValue: string | null;
  optionIds: string[];
}

/**
 * The answers as rows, after checking each against its question: the question must be one of
 * the product's, options must be the question's, SingleChoice takes at most one and choice
 * questions take no text. Whether required questions are answered is the caller's rule.
 */
export function toMemberAnswers(ref: { merchantId: string; memberId: string; productId: string }, questions: Question[], answers: AnswerInput[], now = new Date()): MemberAnswer[] {
  const errors: FieldErrors = {};
  const add = (i: number, field: string, message: string) => (errors[`answers[${i}].${field}`] ??= []).push(message);
  const byId = new Map(questions.map((q) => [q.id, q]));
  const seen = new Set<string>();
  const rows = answers.map((a, i) => {
    const questionId = a.questionId.toLowerCase();
    const question = byId.get(questionId);
    if (!question) add(i, 'questionId', 'Not a question of this product.');
    if (seen.has(questionId)) add(i, 'questionId', 'Answered twice.');
    seen.add(questionId);
    const optionIds = a.optionIds.map((o) => o.toLowerCase());
    if (question?.kind === 'Text' && optionIds.length) add(i, 'optionIds', 'A text question takes no options.');
    if (question && question.kind !== 'Text') {
      if (a.textValue) add(i, 'textValue', 'A choice question takes options, not text.');
      const valid = new Set(question.options.map((o) => o.id));
      if (optionIds.some((o) => !valid.has(o))) add(i, 'optionIds', 'An option is not one of this question.');
      if (question.kind === 'SingleChoice' && optionIds.length > 1) add(i, 'optionIds', 'Choose exactly one option.');
    }
    return Object.assign(new MemberAnswer(), { ...ref, questionId, textValue: a.textValue, optionIds, updatedAt: now });
  });
  if (Object.keys(errors).length) throw DomainError.validation(errors);
  return rows;
}

export const MemberAnswerSchema = new EntitySchema<MemberAnswer>({
  class: MemberAnswer,
  tableName: 'member_answers',
  properties: {
    memberId: { type: 'uuid', primary: true },
    questionId: { type: 'uuid', primary: true },
    merchantId: { type: 'uuid' },
    productId: { type: 'uuid' },
    textValue: { type: 'text', nullable: true },
    optionIds: { type: 'json' },
    updatedAt: { type: 'Date', columnType: 'timestamptz' },
  },
});
