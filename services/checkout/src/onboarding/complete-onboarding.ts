import { DomainError, type FieldErrors, type OnboardingCompletedEvent } from '@billing/contracts';
import { recordEvent, scopeOfMerchant } from '@billing/service-runtime';
import type { CheckoutBackends } from '../backends.js';
import type { Invitation } from '../invitations/invitation.js';
import { validateAnswers } from './answer-validation.js';
import type { Onboarding, OnboardingPaymentMethod } from './onboarding.js';
import { findOwnOnboarding, type WizardDeps } from './wizard.js';

export interface OnboardingIds {
  memberId: string;
  paymentMethodId: string;
  subscriptionId: string;
}

/**
 * Finishes a wizard: final validation, then the member, payment method, subscription and answers
 * in billing, then the invitation is completed and `onboarding.completed` recorded in the same
 * transaction (so exactly once). The whole run holds the wizard's row lock, so concurrent calls
 * queue and the later ones answer the ids of the first. Every billing step converges on what an
 * earlier, interrupted run made: the member is unique by email, the payment method is found by
 * its tokenisation result, and a live subscription to the plan created since the completion
 * started is adopted.
 */
export async function completeOnboarding(deps: WizardDeps, ref: { accountId: string; invitationId: string }): Promise<OnboardingIds> {
  const done = await deps.orm.em.fork().transactional(async (em) => {
    const { invitation, onboarding } = await findOwnOnboarding(em, ref, { lock: true });
    if (completedIds(onboarding)) return completedIds(onboarding);
    await validateForCompletion(deps.backends, invitation, onboarding);
    // Committed before the first billing call, so a re-run after an interruption knows what it made.
    onboarding.completionStartedAt ??= new Date();
    return undefined;
  });
  if (done) return done;

  return deps.orm.em.fork().transactional(async (em) => {
    const { invitation, onboarding } = await findOwnOnboarding(em, ref, { lock: true });
    const finished = completedIds(onboarding);
    if (finished) return finished;
    const { plan } = await validateForCompletion(deps.backends, invitation, onboarding);
    const ids = await provisionInBilling(deps.backends, invitation, onboarding);
    const now = new Date();
    Object.assign(onboarding, ids, { completedAt: now });
    onboarding.touch(now);
    invitation.complete(ids, now);
    const data: OnboardingCompletedEvent = { invitationId: invitation.id, customerAccountId: onboarding.accountId, ...ids, planId: plan.id, email: await memberEmail(deps.backends, invitation, onboarding) };
    recordEvent(em, { type: 'onboarding.completed', merchantId: invitation.merchantId, data, occurredAt: now });
    return ids;
  });
}

function completedIds(o: Onboarding): OnboardingIds | undefined {
  return o.completedAt && o.memberId && o.paymentMethodId && o.subscriptionId ? { memberId: o.memberId, paymentMethodId: o.paymentMethodId, subscriptionId: o.subscriptionId } : undefined;
}

/** Everything the wizard needs before billing is touched; validation_failed names each gap. */
async function validateForCompletion(backends: CheckoutBackends, invitation: Invitation, onboarding: Onboarding) {
  invitation.assertUsable();
  const errors: FieldErrors = {};
  if (!onboarding.details) errors.details = ['Personal details are missing.'];
  if (!onboarding.paymentMethod) errors.paymentMethod = ['A payment method is missing.'];
  let plan: Awaited<ReturnType<CheckoutBackends['plans']['GetPlan']>> | null = null;
  if (!onboarding.planId) errors.planId = ['Choose a plan.'];
  else {
    plan = await backends.plans.GetPlan({ scope: scopeOfMerchant(invitation.merchantId), id: onboarding.planId }).catch((e: unknown) => {
      if (e instanceof DomainError && e.code === 'not_found') return null;
      throw e;
    });
    if (!plan) errors.planId = ['The chosen plan no longer exists.'];
    else if (!plan.isActive) errors.planId = ['The chosen plan is no longer offered; choose another.'];
    else {
      const questions = (await backends.questions.ListQuestions({ scope: scopeOfMerchant(invitation.merchantId), productId: plan.productId })).items;
      Object.assign(errors, validateAnswers(questions, onboarding.answers ?? []));
    }
  }
  if (Object.keys(errors).length || !plan) throw DomainError.validation(errors, 'The onboarding is not complete; see errors.');
  return { plan };
}

async function memberEmail(backends: CheckoutBackends, invitation: Invitation, onboarding: Onboarding): Promise<string> {
  if (invitation.email) return invitation.email;
  return (await backends.customers.GetCustomerAccount({ id: onboarding.accountId })).email;
}

async function provisionInBilling(backends: CheckoutBackends, invitation: Invitation, onboarding: Onboarding): Promise<OnboardingIds> {
  const merchantId = invitation.merchantId;
  const details = onboarding.details!;
  const { member } = await backends.members.CreateMember({
    scope: scopeOfMerchant(merchantId),
    email: await memberEmail(backends, invitation, onboarding),
    firstName: details.firstName,
    lastName: details.lastName,
    phone: details.phone ?? undefined,
  });
  const memberId = member!.id;
  const paymentMethodId = await ensurePaymentMethod(backends, merchantId, memberId, onboarding.paymentMethod!);
  const subscriptionId = await ensureSubscription(backends, { merchantId, memberId, planId: onboarding.planId!, paymentMethodId, since: onboarding.completionStartedAt! });
  await backends.answers.SaveMemberAnswers({
    scope: scopeOfMerchant(merchantId),
    memberId,
    productId: onboarding.productId!,
    answers: (onboarding.answers ?? []).map((a) => ({ questionId: a.questionId, textValue: a.textValue ?? undefined, optionIds: a.optionIds })),
  });
  return { memberId, paymentMethodId, subscriptionId };
}

const sameInstrument = (pm: OnboardingPaymentMethod, m: { type: string; brand?: string; last4: string; expiryMonth?: number; expiryYear?: number; accountName?: string; bsb?: string }) =>
  m.type === pm.type &&
  m.last4 === pm.last4 &&
  (m.brand ?? null) === pm.brand &&
  (m.expiryMonth ?? null) === pm.expiryMonth &&
  (m.expiryYear ?? null) === pm.expiryYear &&
  (m.accountName ?? null) === pm.accountName &&
  (m.bsb ?? null) === pm.bsb;

/** The member's method with this tokenisation result, added when it has none. */
async function ensurePaymentMethod(backends: CheckoutBackends, merchantId: string, memberId: string, pm: OnboardingPaymentMethod): Promise<string> {
  const existing = (await backends.paymentMethods.ListPaymentMethods({ scope: scopeOfMerchant(merchantId), memberId })).items.find((m) => sameInstrument(pm, m));
  if (existing) return existing.id;
  const added = await backends.paymentMethods.AddPaymentMethod({
    scope: scopeOfMerchant(merchantId),
    memberId,
    type: pm.type,
    brand: pm.brand ?? undefined,
    last4: pm.last4,
    expiryMonth: pm.expiryMonth ?? undefined,
    expiryYear: pm.expiryYear ?? undefined,
    accountName: pm.accountName ?? undefined,
    bsb: pm.bsb ?? undefined,
  });
  return added.paymentMethod!.id;
}

/**
 * Subscribes the member to the plan. A live subscription to it that already exists is this
 * onboarding's own when it was created since the completion started (an interrupted earlier
 * run); an older one means the member was already subscribed: conflict.
 */
async function ensureSubscription(backends: CheckoutBackends, input: { merchantId: string; memberId: string; planId: string; paymentMethodId: string; since: Date }): Promise<string> {
  try {
    const sub = await backends.subscriptions.CreateSubscription({ scope: scopeOfMerchant(input.merchantId), memberId: input.memberId, planId: input.planId, paymentMethodId: input.paymentMethodId });
    return sub.id;
  } catch (e) {
    if (e instanceof DomainError && e.code === 'unprocessable') throw DomainError.field('planId', 'The chosen plan is no longer offered; choose another.');
    if (!(e instanceof DomainError && e.code === 'subscription_exists')) throw e;
    const existingId = String(e.extensions.existingSubscriptionId ?? '');
    const existing = existingId ? await backends.subscriptions.GetSubscription({ scope: scopeOfMerchant(input.merchantId), id: existingId }) : undefined;
    if (existing && new Date(existing.createdAt).getTime() >= input.since.getTime()) return existing.id;
    throw new DomainError('conflict', 'You already have a live subscription to this plan.', existing ? { existingSubscriptionId: existing.id } : {});
  }
}
