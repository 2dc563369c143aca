import { z } from 'zod';
import {
  AcceptedInvitation,
  ChooseOnboardingPlanRequest,
  CompleteOnboardingRequest,
  DomainError,
  InvitationPreview,
  InvitationTokenRequest,
  OnboardingCompletion,
  OnboardingState,
  PathId,
  SaveOnboardingAnswersRequest,
  SaveOnboardingDetailsRequest,
  SaveOnboardingPaymentMethodRequest,
  ACCOUNT_STATES,
  INVITATION_STATUSES,
  ONBOARDING_STEPS,
  PLAN_INTERVALS,
  QUESTION_KINDS,
  type OnboardingPlan,
} from '@billing/contracts';
import { toMajorUnits } from '@billing/money';
import type { Principal } from '../auth/principal.js';
import type { Backends } from '../backends/clients.js';
import { defineRoute, noContent, ok, type RouteSpec } from '../http/route.js';
import { oneOf, orNull } from '../http/views.js';
import type { AcceptedInvitation__Output } from '@billing/proto-types/checkout/v1/AcceptedInvitation';
import type { InvitationPreview__Output } from '@billing/proto-types/checkout/v1/InvitationPreview';
import type { OnboardingPlan__Output } from '@billing/proto-types/checkout/v1/OnboardingPlan';
import type { OnboardingState__Output } from '@billing/proto-types/checkout/v1/OnboardingState';

function accountIdOf(principal: Principal): string {
  if (principal.kind !== 'customer') throw new DomainError('unauthenticated', 'A customer token is required.');
  return principal.accountId;
}

/** Plan of the wizard: minor units become a decimal amount, once, here. */
const toOnboardingPlan = (p: OnboardingPlan__Output): OnboardingPlan => ({
  id: p.id,
  productId: p.productId,
  name: p.name,
  amount: toMajorUnits(Number(p.amountMinor), p.currency),
  currency: p.currency,
  interval: oneOf(PLAN_INTERVALS, p.interval, 'interval'),
  intervalCount: p.intervalCount,
  trialDays: p.trialDays,
});

function toInvitationPreview(p: InvitationPreview__Output): InvitationPreview {
  return {
    invitationId: p.invitationId,
    merchantName: p.merchantName,
    firstName: p.firstName,
    lastName: p.lastName,
    email: orNull(p.email),
    phone: orNull(p.phone),
    expiresAt: p.expiresAt,
    status: oneOf(INVITATION_STATUSES, p.status, 'status'),
    accountState: oneOf(ACCOUNT_STATES, p.accountState, 'accountState'),
  };
}

function toAcceptedInvitation(a: AcceptedInvitation__Output): AcceptedInvitation {
  return {
    invitationId: a.invitationId,
    merchantName: a.merchantName,
    firstName: a.firstName,
    lastName: a.lastName,
    email: orNull(a.email),
    phone: orNull(a.phone),
    expiresAt: a.expiresAt,
    plans: a.plans.map(toOnboardingPlan),
  };
}

function toOnboardingState(s: OnboardingState__Output): OnboardingState {
  const d = s.details;
  const pm = s.paymentMethod;
  return {
    invitationId: s.invitationId,
    status: oneOf(INVITATION_STATUSES, s.status, 'status'),
    step: oneOf(ONBOARDING_STEPS, s.step, 'step'),
    merchantName: s.merchantName,
    firstName: s.firstName,
    lastName: s.lastName,
    email: orNull(s.email),
    phone: orNull(s.phone),
    expiresAt: s.expiresAt,
    details: d
      ? {
          firstName: d.firstName,
          lastName: d.lastName,
          phone: orNull(d.phone),
          addressLine1: orNull(d.addressLine1),
          city: orNull(d.city),
          state: orNull(d.state),
          postCode: orNull(d.postCode),
          country: orNull(d.country),
        }
      : null,
    paymentMethod: pm
      ? {
          type: pm.type,
          brand: orNull(pm.brand),
          last4: pm.last4 || null,
          expiryMonth: orNull(pm.expiryMonth),
          expiryYear: orNull(pm.expiryYear),
          accountName: orNull(pm.accountName),
          bsb: orNull(pm.bsb),
        }
      : null,
    planId: orNull(s.planId),
    answers: s.answers.map((a) => ({ questionId: a.questionId, textValue: orNull(a.textValue), optionIds: a.optionIds })),
    answersSaved: s.answersSaved,
    plans: s.plans.map(toOnboardingPlan),
    questions: s.questions.map((q) => ({
      id: q.id,
      text: q.text,
      kind: oneOf(QUESTION_KINDS, q.kind, 'kind'),
      required: q.required,
      order: q.order,
      options: q.options.map((o) => ({ id: o.id, label: o.label })),
    })),
    memberId: orNull(s.memberId),
    paymentMethodId: orNull(s.paymentMethodId),
    subscriptionId: orNull(s.subscriptionId),
    completedAt: orNull(s.completedAt),
  };
}

/** Proto has no null: a null optional field is sent as absent. */
const absentIfNull = <T>(v: T | null | undefined): T | undefined => v ?? undefined;

const WRITE_NOTE = 'Safe to repeat (the wizard re-sends on every Continue). 204 on success; 400 validation; 404 when the invitation was not accepted by this customer; 409 once the onboarding is completed, and while a completion of it is running; 410 when the invitation has been revoked or has expired.';

export function onboardingRoutes(backends: Backends): RouteSpec[] {
  const onboarding = backends.checkout.onboarding;
  const ref = (principal: Principal, invitationId: string) => ({ accountId: accountIdOf(principal), invitationId });
  return [
    defineRoute({
      method: 'POST',
      url: '/api/onboard/preview',
      tag: 'Self-serve onboarding',
      summary: 'Look at an invitation before signing in (the onboarding page)',
      description:
        'Anonymous: the token of the link is the credential. Says whom the invitation is for and whether its email already has an account (`accountState`: None | Unclaimed | Claimed), so the page offers sign-up or sign-in. Unknown token 404; revoked or expired 410.',
      auth: { anonymous: true },
      body: InvitationTokenRequest,
      responses: { 200: InvitationPreview, 400: null, 404: null, 410: null },
      handler: async ({ body }) => ok(toInvitationPreview(await onboarding.PreviewInvitation({ token: body.token }))),
    }),
    defineRoute({
      method: 'POST',
      url: '/api/onboard/accept',
      tag: 'Self-serve onboarding',
      summary: 'Accept an invitation as the signed-in customer',
      description:
        'Binds the invitation to the customer for good and opens its wizard; accepting again by the same customer answers the same. Unknown token 404; revoked or expired 410; accepted by another account 409.',
      auth: { customer: true },
      body: InvitationTokenRequest,
      responses: { 200: AcceptedInvitation, 400: null, 401: null, 404: null, 409: null, 410: null },
      handler: async ({ body, principal }) => {
        const res = await onboarding.AcceptInvitation({ accountId: accountIdOf(principal), token: body.token });
        return ok(toAcceptedInvitation(res));
      },
    }),
    defineRoute({
      method: 'GET',
      url: '/api/onboard/:invitationId',
      tag: 'Self-serve onboarding',
      summary: 'Read the saved wizard state',
      description:
        '`step` is where the wizard resumes (Details | PaymentMethod | Plan | Questions | Review | Done), derived from what has been saved (Questions is passed over when the chosen plan\'s product has none); saved answers that completion would refuse against the questions as they are now (a required question added since, an answered question or option removed) make it Questions, and a chosen plan the merchant has withdrawn since (made inactive) makes it Plan. `questions` are those of the chosen plan\'s product, in display order. Another customer\'s invitation is 404.',
      auth: { customer: true },
      params: z.object({ invitationId: PathId }),
      responses: { 200: OnboardingState, 401: null, 404: null },
      handler: async ({ params, principal }) => ok(toOnboardingState(await onboarding.GetOnboarding(ref(principal, params.invitationId)))),
    }),
    defineRoute({
      method: 'PATCH',
      url: '/api/onboard/details',
      tag: 'Self-serve onboarding',
      summary: 'Save the personal-details step',
      description: WRITE_NOTE,
      auth: { customer: true },
      body: SaveOnboardingDetailsRequest,
      responses: { 204: null, 400: null, 401: null, 404: null, 409: null, 410: null },
      handler: async ({ body, principal }) => {
        const { invitationId, ...d } = body;
        await onboarding.SaveDetails({
          ref: ref(principal, invitationId),
          details: { firstName: d.firstName, lastName: d.lastName, phone: absentIfNull(d.phone), addressLine1: absentIfNull(d.addressLine1), city: absentIfNull(d.city), state: absentIfNull(d.state), postCode: absentIfNull(d.postCode), country: absentIfNull(d.country) },
        });
        return noContent();
      },
    }),
    defineRoute({
      method: 'POST',
      url: '/api/onboard/payment-method',
      tag: 'Self-serve onboarding',
      summary: 'Save the payment method (a tokenisation result)',
      description: `type Card (brand, last4, expiryMonth, expiryYear) or BankAccount (accountName, bsb, last4). Only type is required here: the step saves a draft, and what is sent is checked (400 naming the field: last4 not 4 digits, a Card's expiry in the past, bank fields on a Card or expiry on a BankAccount); completion asks for what the method still lacks (last4; a Card's expiryMonth and expiryYear; a BankAccount's accountName and bsb) as \`paymentMethod.<field>\`, and the wizard resumes at PaymentMethod until it is complete. Full card or account numbers are refused (400) and never stored, in their own fields or in brand or accountName. ${WRITE_NOTE}`,
      auth: { customer: true },
      body: SaveOnboardingPaymentMethodRequest,
      responses: { 204: null, 400: null, 401: null, 404: null, 409: null, 410: null },
      handler: async ({ body, principal }) => {
        await onboarding.SavePaymentMethod({
          ref: ref(principal, body.invitationId),
          paymentMethod: {
            type: body.type,
            brand: absentIfNull(body.brand),
            last4: absentIfNull(body.last4),
            expiryMonth: absentIfNull(body.expiryMonth),
            expiryYear: absentIfNull(body.expiryYear),
            accountName: absentIfNull(body.accountName),
            bsb: absentIfNull(body.bsb),
          },
        });
        return noContent();
      },
    }),
    defineRoute({
      method: 'PATCH',
      url: '/api/onboard/plan',
      tag: 'Self-serve onboarding',
      summary: 'Choose the plan',
      description: `An unknown or inactive plan of the merchant is 400 naming planId. Choosing a plan of another product drops the saved answers. ${WRITE_NOTE}`,
      auth: { customer: true },
      body: ChooseOnboardingPlanRequest,
      responses: { 204: null, 400: null, 401: null, 404: null, 409: null, 410: null },
      handler: async ({ body, principal }) => {
        await onboarding.ChoosePlan({ ref: ref(principal, body.invitationId), planId: body.planId });
        return noContent();
      },
    }),
    defineRoute({
      method: 'PATCH',
      url: '/api/onboard/answers',
      tag: 'Self-serve onboarding',
      summary: 'Save the answer draft',
      description: `The full answer set replaces any previous draft (null or [] saves an empty set). Whether required questions are answered and options are valid is checked at completion. ${WRITE_NOTE}`,
      auth: { customer: true },
      body: SaveOnboardingAnswersRequest,
      responses: { 204: null, 400: null, 401: null, 404: null, 409: null, 410: null },
      handler: async ({ body, principal }) => {
        await onboarding.SaveAnswers({
          ref: ref(principal, body.invitationId),
          answers: (body.answers ?? []).map((a) => ({ questionId: a.questionId, textValue: absentIfNull(a.textValue), optionIds: a.optionIds ?? [] })),
        });
        return noContent();
      },
    }),
    defineRoute({
      method: 'POST',
      url: '/api/onboard/complete',
      tag: 'Self-serve onboarding',
      summary: 'Complete the onboarding',
      description:
        'Final validation, 400 with `errors` naming each gap: `details`, `paymentMethod` (or `paymentMethod.<field>` for what a saved method still lacks), `planId` (missing, unknown or no longer active), and `answers.<questionId>` (a required question unanswered, a SingleChoice without exactly one option, an option not of its question). Then creates the member, payment method and subscription in billing, stores the answers beside the member and emits `onboarding.completed` once. Repeating it answers the same ids; a run interrupted half way converges on what it made. A call made while another completion of the same onboarding runs waits for it and answers its ids (409 if it is still running after 3 seconds); the wizard\'s steps answer 409 while a completion runs. Another customer\'s invitation 404; revoked or expired 410; the member already subscribed to the plan 409.',
      auth: { customer: true },
      body: CompleteOnboardingRequest,
      responses: { 200: OnboardingCompletion, 400: null, 401: null, 404: null, 409: null, 410: null },
      handler: async ({ body, principal }) => {
        const { memberId, paymentMethodId, subscriptionId } = await onboarding.CompleteOnboarding(ref(principal, body.invitationId));
        return ok({ memberId, paymentMethodId, subscriptionId });
      },
    }),
  ];
}
