import type { MikroORM } from '@mikro-orm/postgresql';
import { requireScope, type CallScope, type ServiceImpl } from '@billing/service-runtime';
import { findMember } from '../members/members-grpc.js';
import { findProduct } from '../products/products-grpc.js';
import { compareQuestions, Question } from '../questions/question.js';
import { MemberAnswer, toMemberAnswers } from './member-answer.js';

function ordered(answers: MemberAnswer[], questions: Question[]) {
  const position = new Map([...questions].sort(compareQuestions).map((q, i) => [q.id, i]));
  return answers
    .sort((a, b) => (position.get(a.questionId) ?? 0) - (position.get(b.questionId) ?? 0))
    .map((a) => ({ questionId: a.questionId, textValue: a.textValue ?? undefined, optionIds: a.optionIds }));
}

/** One answer as SaveMemberAnswers receives it. */
export interface AnswerInput {
  questionId: string;
  textValue?: string | null;
  optionIds: string[];
}

/**
 * Replaces the member's answers to the product's questions (see SaveMemberAnswersRequest), in a
 * transaction holding the member's row lock, which serialises concurrent replacements.
 */
export async function saveMemberAnswers(orm: MikroORM, scope: CallScope, req: { memberId: string; productId: string; answers: AnswerInput[] }) {
  return orm.em.fork().transactional(async (em) => {
    const member = await findMember(em, scope, req.memberId, { lock: true });
    const product = await findProduct(em, { kind: 'merchant', merchantId: member.merchantId }, req.productId);
    const questions = await em.find(Question, { productId: product.id });
    const rows = toMemberAnswers(
      { merchantId: member.merchantId, memberId: member.id, productId: product.id },
      questions,
      req.answers.map((a) => ({ questionId: a.questionId, textValue: a.textValue ?? null, optionIds: a.optionIds })),
    );
    await em.nativeDelete(MemberAnswer, { memberId: member.id, productId: product.id });
    em.persist(rows);
    return { items: ordered(rows, questions) };
  });
}

export function answersGrpc(orm: MikroORM): ServiceImpl<'billing.v1.Answers'> {
  return {
    SaveMemberAnswers: async (req) => saveMemberAnswers(orm, requireScope(req.scope), req),

    ListMemberAnswers: async (req) => {
      const scope = requireScope(req.scope);
      const em = orm.em.fork();
      const member = await findMember(em, scope, req.memberId);
      const answers = await em.find(MemberAnswer, req.productId ? { memberId: member.id, productId: req.productId.toLowerCase() } : { memberId: member.id });
      const questions = await em.find(Question, { id: { $in: answers.map((a) => a.questionId) } });
      return { items: ordered(answers, questions) };
    },
  };
}
