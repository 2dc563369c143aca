import type { FieldErrors } from '@billing/contracts';
import type { OnboardingAnswer } from './onboarding.js';

export interface QuestionForValidation {
  id: string;
  kind: string;
  required: boolean;
  options: { id: string }[];
}

/**
 * Final validation of an answer set against the product's questions. Errors are keyed
 * `answers.<questionId>` so a page can show each at its question: a required question without an
 * answer, a SingleChoice without exactly one option, an option not of its question, text on a
 * choice question, and an answer to a question not of the product.
 */
export function validateAnswers(questions: QuestionForValidation[], answers: OnboardingAnswer[]): FieldErrors {
  const errors: FieldErrors = {};
  const add = (questionId: string, message: string) => (errors[`answers.${questionId}`] ??= []).push(message);
  const byId = new Map(questions.map((q) => [q.id.toLowerCase(), q]));
  const answered = new Map(answers.map((a) => [a.questionId.toLowerCase(), a]));
  for (const a of answers) if (!byId.has(a.questionId.toLowerCase())) add(a.questionId, 'Not a question of the chosen plan.');
  for (const q of questions) {
    const a = answered.get(q.id.toLowerCase());
    const text = a?.textValue?.trim() ?? '';
    const optionIds = (a?.optionIds ?? []).map((o) => o.toLowerCase());
    if (q.kind === 'Text') {
      if (optionIds.length) add(q.id, 'A text question takes no options.');
      if (q.required && !text) add(q.id, 'This question requires an answer.');
      continue;
    }
    if (a?.textValue) add(q.id, 'A choice question takes options, not text.');
    const valid = new Set(q.options.map((o) => o.id.toLowerCase()));
    if (optionIds.some((o) => !valid.has(o))) add(q.id, 'An option is not one of this question.');
    if (new Set(optionIds).size !== optionIds.length) add(q.id, 'An option is chosen twice.');
    if (q.kind === 'SingleChoice' && optionIds.length > 1) add(q.id, 'Choose exactly one option.');
    if (q.required && optionIds.length === 0) add(q.id, q.kind === 'SingleChoice' ? 'Choose exactly one option.' : 'Choose at least one option.');
  }
  return errors;
}
