import { z } from 'zod';
import { DateTime, NonBlankText, Email, PageQuery, Uuid } from './common.js';

/** A merchant's customer: unique per merchant by email, compared case-insensitively. */
export const Member = z
  .object({
    id: Uuid,
    merchantId: Uuid,
    email: z.string(),
    firstName: z.string(),
    lastName: z.string(),
    phone: z.string().nullable(),
    createdAt: DateTime,
    updatedAt: DateTime,
  })
  .meta({ id: 'Member' });
export type Member = z.infer<typeof Member>;

export const CreateMemberRequest = z
  .object({
    merchantId: Uuid,
    email: Email,
    firstName: NonBlankText(100),
    lastName: NonBlankText(100),
    phone: z.string().max(50).nullish(),
  })
  .meta({ id: 'CreateMemberRequest' });
export type CreateMemberRequest = z.infer<typeof CreateMemberRequest>;

/** `email` matches exactly, case-insensitively. */
export const ListMembersQuery = PageQuery.extend({ merchantId: Uuid.optional(), email: z.string().trim().max(256).optional() });

/** A member's answer to one onboarding question, as last saved (a completed onboarding or hosted checkout). */
export const MemberAnswer = z
  .object({
    questionId: Uuid,
    /** Text questions; null on choice questions. */
    textValue: z.string().nullable(),
    /** Choice questions: the chosen options' ids; empty on text questions. */
    optionIds: z.array(Uuid),
  })
  .meta({ id: 'MemberAnswer' });
export type MemberAnswer = z.infer<typeof MemberAnswer>;

/** `productId`: only the answers to that product's questions. */
export const ListMemberAnswersQuery = PageQuery.extend({ productId: Uuid.optional() });

/** Payload (`data`) of `member.created`: the new member. */
export const MemberCreatedEvent = Member.meta({ id: 'MemberCreatedEvent' });
export type MemberCreatedEvent = z.infer<typeof MemberCreatedEvent>;
