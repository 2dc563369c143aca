import { z } from 'zod';
import { DateTime, required, Uuid } from './common.js';
import { INVITATION_STATUSES } from './invitations.js';
import { checkPaymentMethodDetails, Last4, paymentMethodDetailsShape } from './payment-methods.js';
import { PLAN_INTERVALS } from './plans.js';
import { QUESTION_KINDS } from './questions.js';

/** Where a wizard stands, derived from what has been saved; a reload resumes here. */
export const ONBOARDING_STEPS = ['Details', 'PaymentMethod', 'Plan', 'Questions', 'Review', 'Done'] as const;
export type OnboardingStep = (typeof ONBOARDING_STEPS)[number];

/** Whether the invitation's email already has a customer account, and whether it has a password. */
export const ACCOUNT_STATES = ['None', 'Unclaimed', 'Claimed'] as const;

/** Required: a string with a non-whitespace character (empty or blank: one "Required."). */
const RequiredText = (max: number) => z.string(required()).regex(/\S/, 'Required.').max(max, `Must be at most ${max} characters.`);
const OptionalText = (max: number) => z.string('Must be a string.').max(max, `Must be at most ${max} characters.`).nullish();

export const InvitationTokenRequest = z.object({ token: z.string(required()).min(1, 'Required.').max(200, 'Must be at most 200 characters.') }).meta({ id: 'InvitationTokenRequest' });

export const OnboardingPlan = z
  .object({
    id: Uuid,
    productId: Uuid,
    name: z.string(),
    amount: z.number(),
    currency: z.string(),
    interval: z.enum(PLAN_INTERVALS),
    intervalCount: z.number().int(),
    trialDays: z.number().int(),
  })
  .meta({ id: 'OnboardingPlan' });
export type OnboardingPlan = z.infer<typeof OnboardingPlan>;

export const InvitationPreview = z
  .object({
    invitationId: Uuid,
    merchantName: z.string(),
    firstName: z.string(),
    lastName: z.string(),
    email: z.string().nullable(),
    phone: z.string().nullable(),
    expiresAt: DateTime,
    status: z.enum(INVITATION_STATUSES),
    accountState: z.enum(ACCOUNT_STATES),
  })
  .meta({ id: 'InvitationPreview' });
export type InvitationPreview = z.infer<typeof InvitationPreview>;

/** contract §5: the answer to `POST /api/onboard/accept`. */
export const AcceptedInvitation = z
  .object({
    invitationId: Uuid,
    merchantName: z.string(),
    firstName: z.string(),
    lastName: z.string(),
    email: z.string().nullable(),
    phone: z.string().nullable(),
    expiresAt: DateTime,
    plans: z.array(OnboardingPlan),
  })
  .meta({ id: 'AcceptedInvitation' });
export type AcceptedInvitation = z.infer<typeof AcceptedInvitation>;

export const OnboardingDetailsFields = {
  firstName: RequiredText(100),
  lastName: RequiredText(100),
  phone: OptionalText(50),
  addressLine1: OptionalText(200),
  city: OptionalText(100),
  state: OptionalText(100),
  postCode: OptionalText(20),
  country: OptionalText(100),
};

export const OnboardingDetails = z.object({
  firstName: z.string(),
  lastName: z.string(),
  phone: z.string().nullable(),
  addressLine1: z.string().nullable(),
  city: z.string().nullable(),
  state: z.string().nullable(),
  postCode: z.string().nullable(),
  country: z.string().nullable(),
});

export const SaveOnboardingDetailsRequest = z.object({ invitationId: Uuid, ...OnboardingDetailsFields }).meta({ id: 'SaveOnboardingDetailsRequest' });

export const SaveOnboardingPaymentMethodRequest = z
  // Only type is required at this step (the wizard saves a draft); completion asks for the rest.
  .looseObject({ invitationId: Uuid, ...paymentMethodDetailsShape, last4: Last4.nullish() })
  .superRefine((pm, ctx) => checkPaymentMethodDetails(pm, ctx, new Date(), { draft: true }))
  .meta({ id: 'SaveOnboardingPaymentMethodRequest' });

export const OnboardingPaymentMethod = z.object({
  type: z.string(),
  brand: z.string().nullable(),
  last4: z.string().nullable(),
  expiryMonth: z.number().int().nullable(),
  expiryYear: z.number().int().nullable(),
  accountName: z.string().nullable(),
  bsb: z.string().nullable(),
});

export const ChooseOnboardingPlanRequest = z.object({ invitationId: Uuid, planId: Uuid }).meta({ id: 'ChooseOnboardingPlanRequest' });

export const OnboardingAnswer = z.object({
  questionId: Uuid,
  textValue: z.string('Must be a string.').max(2000, 'Must be at most 2000 characters.').nullish(),
  optionIds: z.array(Uuid).max(100).nullish(),
});

export const SaveOnboardingAnswersRequest = z
  .object({ invitationId: Uuid, answers: z.array(OnboardingAnswer).max(200).nullish() })
  .superRefine((b, ctx) => {
    const seen = new Set<string>();
    (b.answers ?? []).forEach((a, i) => {
      if (seen.has(a.questionId.toLowerCase())) ctx.addIssue({ code: 'custom', path: ['answers', i, 'questionId'], message: 'Each question is answered at most once.' });
      seen.add(a.questionId.toLowerCase());
    });
  })
  .meta({ id: 'SaveOnboardingAnswersRequest' });

export const CompleteOnboardingRequest = z.object({ invitationId: Uuid }).meta({ id: 'CompleteOnboardingRequest' });

export const OnboardingCompletion = z.object({ memberId: Uuid, paymentMethodId: Uuid, subscriptionId: Uuid }).meta({ id: 'OnboardingCompletion' });
export type OnboardingCompletion = z.infer<typeof OnboardingCompletion>;

export const OnboardingQuestion = z.object({
  id: Uuid,
  text: z.string(),
  kind: z.enum(QUESTION_KINDS),
  required: z.boolean(),
  order: z.number().int(),
  options: z.array(z.object({ id: Uuid, label: z.string() })),
});

/** contract §5: the saved wizard state of `GET /api/onboard/{invitationId}`. */
export const OnboardingState = z
  .object({
    invitationId: Uuid,
    status: z.enum(INVITATION_STATUSES),
    step: z.enum(ONBOARDING_STEPS),
    merchantName: z.string(),
    firstName: z.string(),
    lastName: z.string(),
    email: z.string().nullable(),
    phone: z.string().nullable(),
    expiresAt: DateTime,
    details: OnboardingDetails.nullable(),
    paymentMethod: OnboardingPaymentMethod.nullable(),
    planId: Uuid.nullable(),
    answers: z.array(z.object({ questionId: Uuid, textValue: z.string().nullable(), optionIds: z.array(Uuid) })),
    answersSaved: z.boolean(),
    plans: z.array(OnboardingPlan),
    questions: z.array(OnboardingQuestion),
    memberId: Uuid.nullable(),
    paymentMethodId: Uuid.nullable(),
    subscriptionId: Uuid.nullable(),
    completedAt: DateTime.nullable(),
  })
  .meta({ id: 'OnboardingState' });
export type OnboardingState = z.infer<typeof OnboardingState>;

/** Payload (`data`) of `onboarding.completed`. */
export const OnboardingCompletedEvent = z
  .object({
    invitationId: Uuid,
    customerAccountId: Uuid,
    memberId: Uuid,
    paymentMethodId: Uuid,
    subscriptionId: Uuid,
    planId: Uuid,
    email: z.string(),
  })
  .meta({ id: 'OnboardingCompletedEvent' });
export type OnboardingCompletedEvent = z.infer<typeof OnboardingCompletedEvent>;
