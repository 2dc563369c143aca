import { Onboarding, type OnboardingAnswer, type OnboardingDetails, type OnboardingPaymentMethod } from './onboarding.js';

/** An `onboardings` row as jsonb (`to_jsonb`): instants in ISO 8601. */
export interface OnboardingRow {
  invitation_id: string;
  account_id: string;
  details: OnboardingDetails | null;
  payment_method: OnboardingPaymentMethod | null;
  plan_id: string | null;
  product_id: string | null;
  answers: OnboardingAnswer[] | null;
  completion_started_at: string | null;
  completion_lease_until: string | null;
  member_id: string | null;
  payment_method_id: string | null;
  subscription_id: string | null;
  completed_at: string | null;
  updated_at: string;
}

const dateOf = (s: string | null) => (s === null ? null : new Date(s));

/** The entity of a row read by hand-written SQL, detached from any unit of work. */
export function onboardingOfRow(r: OnboardingRow): Onboarding {
  return Object.assign(new Onboarding(), {
    invitationId: r.invitation_id,
    accountId: r.account_id,
    details: r.details,
    paymentMethod: r.payment_method,
    planId: r.plan_id,
    productId: r.product_id,
    answers: r.answers,
    completionStartedAt: dateOf(r.completion_started_at),
    completionLeaseUntil: dateOf(r.completion_lease_until),
    memberId: r.member_id,
    paymentMethodId: r.payment_method_id,
    subscriptionId: r.subscription_id,
    completedAt: dateOf(r.completed_at),
    updatedAt: new Date(r.updated_at),
  });
}
