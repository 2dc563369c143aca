import { DomainError, paymentMethodGaps, type FieldErrors, type OnboardingCompletedEvent } from '@billing/contracts';
import { scopeOfMerchant, settledValue } from '@billing/service-runtime';
import type { CheckoutBackends } from '../backends.js';
import type { Invitation } from '../invitations/invitation.js';
import { validateAnswers } from './answer-validation.js';
import type { Onboarding } from './onboarding.js';
import { readWizard, recordCompletion, releaseWizard, takeWizard, type TakenWizard } from './completion-store.js';
import type { WizardDeps } from './wizard.js';

export interface OnboardingIds {
  memberId: string;
  paymentMethodId: string;
  subscriptionId: string;
}

/** How long a completion holds its wizard when the caller names no lease (CHECKOUT_COMPLETION_LEASE_SECONDS). */
const DEFAULT_LEASE_SECONDS = 30;
/**
 * How long a completion waits for another run of the same wizard before answering conflict: well
 * inside the gateway's deadline for the call (`GRPC_DEADLINE_MS`, 5 s by default), so the caller
 * gets the conflict and not the gateway's 503 for a call past its deadline.
 */
const DEFAULT_WAIT_MS = 3_000;
/** How often a waiting completion looks again. */
const WAIT_POLL_MS = 25;

/**
 * Finishes a wizard: final validation, then the member, payment method, subscription and answers
 * in billing (one enrolment call), then the invitation is completed and `onboarding.completed`
 * recorded in one statement (so exactly once). A run holds the wizard by its completion lease (a column, taken
 * by one committed statement) while it calls billing, never by a lock or an open transaction, so
 * no connection of the service's pool waits on billing. A concurrent run of the same wizard waits
 * for the one holding it and answers its ids (or takes over once its lease is given up or has
 * expired: a run that died); after `waitMs` it answers conflict. Wizard edits are refused while
 * the lease is held. Every step of the enrolment converges on what an earlier, interrupted run
 * made: the member is unique by email, the payment method is found by its tokenisation result,
 * and a live subscription to the plan created since the completion started by this invitation's
 * enrolment is adopted (another invitation's, made by a concurrent completion, is a conflict).
 *
 * Validation asks billing for the plan and its questions once, before the lease: the wizard as
 * taken is checked against that answer again (asking anew only if its plan changed meanwhile).
 * Billing can change the plan during the enrolment either way; the enrolment refuses an
 * inactive one.
 */
export async function completeOnboarding(deps: WizardDeps, ref: { accountId: string; invitationId: string }): Promise<OnboardingIds> {
  const read = await readWizard(deps.orm, ref);
  const done = completedIds(read.onboarding);
  if (done) return done;
  const enroleeLookup = enroleeOf(deps.backends, read.invitation, read.onboarding);
  // Awaited after validation, whose refusal is the answer when both fail.
  enroleeLookup.catch(() => undefined);
  const checked = await planCheckOf(deps.backends, read.invitation.merchantId, read.onboarding);
  assertCompletable(read.invitation, read.onboarding, checked);

  const taken = await takeOrWait(deps, ref);
  if ('ids' in taken) return taken.ids;
  const { invitation, onboarding, leaseUntil } = taken;
  let recorded = false;
  try {
    const check = onboarding.planId === checked?.planId ? checked : await planCheckOf(deps.backends, invitation.merchantId, onboarding);
    const plan = assertCompletable(invitation, onboarding, check);
    const { email, ownMethodOnly } = await enroleeLookup;
    const ids = await provisionInBilling(deps.backends, invitation, onboarding, email, ownMethodOnly);
    deps.fault?.('onboarding-after-enrolment');
    const data: OnboardingCompletedEvent = { invitationId: invitation.id, customerAccountId: onboarding.accountId, ...ids, planId: plan.id, email };
    recorded = await recordCompletion(deps.orm, { invitation, data, now: new Date() });
    // Else a run that took over once this one's lease expired recorded its completion first.
    return recorded ? ids : completedIds((await readWizard(deps.orm, ref)).onboarding)!;
  } finally {
    if (!recorded) await releaseWizard(deps.orm, invitation.id, leaseUntil!);
  }
}

/**
 * This run's lease of the wizard, or the ids of the run that completed it while this one waited
 * for its lease; conflict after `waitMs` of another run holding it.
 */
async function takeOrWait(deps: WizardDeps, ref: { accountId: string; invitationId: string }): Promise<TakenWizard | { ids: OnboardingIds }> {
  const until = Date.now() + (deps.completionWaitMs ?? DEFAULT_WAIT_MS);
  for (;;) {
    const taken = await takeWizard(deps.orm, ref, deps.completionLeaseSeconds ?? DEFAULT_LEASE_SECONDS);
    if (taken.leased) return taken;
    const ids = completedIds(taken.onboarding);
    if (ids) return { ids };
    // Revoked (or expired) since the wizard was read: gone, rather than waiting for a lease.
    taken.invitation.assertUsable();
    if (Date.now() >= until) throw new DomainError('conflict', 'Another completion of this onboarding is in progress; retry shortly.');
    await new Promise((r) => setTimeout(r, WAIT_POLL_MS));
  }
}

function completedIds(o: Onboarding): OnboardingIds | undefined {
  return o.completedAt && o.memberId && o.paymentMethodId && o.subscriptionId ? { memberId: o.memberId, paymentMethodId: o.paymentMethodId, subscriptionId: o.subscriptionId } : undefined;
}

type Plan = Awaited<ReturnType<CheckoutBackends['plans']['GetPlan']>>;
type Question = Awaited<ReturnType<CheckoutBackends['questions']['ListQuestions']>>['items'][number];

/** Billing's answer about a wizard's chosen plan: the plan (null: gone) and, when it is offered, its product's questions. */
interface PlanCheck {
  planId: string;
  plan: Plan | null;
  questions: Question[];
}

/**
 * Billing's answer about the wizard's chosen plan. The questions of the product the wizard saved
 * with the plan are asked for at the same time as the plan (one wait, not two), and asked again
 * only if the plan turns out to be of another product.
 */
async function planCheckOf(backends: CheckoutBackends, merchantId: string, wizard: { planId: string | null; productId: string | null }): Promise<PlanCheck | undefined> {
  const { planId } = wizard;
  if (!planId) return undefined;
  const scope = scopeOfMerchant(merchantId);
  const questionsOf = async (productId: string) => (await backends.questions.ListQuestions({ scope, productId })).items;
  const [planRead, saved] = await Promise.allSettled([
    backends.plans.GetPlan({ scope, id: planId }).catch((e: unknown) => {
      if (e instanceof DomainError && e.code === 'not_found') return null;
      throw e;
    }),
    wizard.productId ? questionsOf(wizard.productId) : Promise.resolve(undefined),
  ]);
  const plan = settledValue(planRead);
  if (!plan?.isActive) return { planId, plan, questions: [] };
  const questions = plan.productId === wizard.productId ? settledValue(saved) : undefined;
  return { planId, plan, questions: questions ?? (await questionsOf(plan.productId)) };
}

/** Everything the wizard needs before billing is touched, or validation_failed naming each gap; answers the plan. */
function assertCompletable(invitation: Invitation, onboarding: Onboarding, check: PlanCheck | undefined): Plan {
  invitation.assertUsable();
  const errors: FieldErrors = {};
  if (!onboarding.details) errors.details = ['Personal details are missing.'];
  if (!onboarding.paymentMethod) errors.paymentMethod = ['A payment method is missing.'];
  else for (const [field, message] of Object.entries(paymentMethodGaps(onboarding.paymentMethod))) errors[`paymentMethod.${field}`] = [message];
  const plan = check?.plan;
  if (!check) errors.planId = ['Choose a plan.'];
  else if (!plan) errors.planId = ['The chosen plan no longer exists.'];
  else if (!plan.isActive) errors.planId = ['The chosen plan is no longer offered; choose another.'];
  else Object.assign(errors, validateAnswers(check.questions, onboarding.answers ?? []));
  if (Object.keys(errors).length || !plan) throw DomainError.validation(errors, 'The onboarding is not complete; see errors.');
  return plan;
}

/**
 * The member's email (the invitation's, else the account's) and whether the subscription is
 * charged on the wizard's payment method only. Anyone holding the invitation's link can accept it
 * with an account of their own, so the completer has proved no claim to the payment methods an
 * existing member of that email already has: the subscription falls back to them only when the
 * completing account's email is verified and is the member's email (a stranger's wizard could
 * otherwise have that member's saved card charged, as a hosted checkout's could).
 */
async function enroleeOf(backends: CheckoutBackends, invitation: Invitation, onboarding: Onboarding): Promise<{ email: string; ownMethodOnly: boolean }> {
  const account = await backends.customers.GetCustomerAccount({ id: onboarding.accountId });
  const email = invitation.email ?? account.email;
  const proven = account.emailVerified && account.email.toLowerCase() === email.toLowerCase();
  return { email, ownMethodOnly: !proven };
}

/**
 * The member, its payment method, its subscription and its answers, in one call to billing. A
 * live subscription to the plan created since the completion started, by this invitation's
 * enrolment (or outside any enrolment), is this onboarding's own (an interrupted earlier run) and
 * is adopted; an older one, or one another invitation's completion made, means the customer is
 * already subscribed: conflict.
 */
async function provisionInBilling(backends: CheckoutBackends, invitation: Invitation, onboarding: Onboarding, email: string, ownMethodOnly: boolean): Promise<OnboardingIds> {
  const details = onboarding.details!;
  const pm = onboarding.paymentMethod!;
  try {
    const { member, paymentMethod, subscription } = await backends.enrolments.Enrol({
      scope: scopeOfMerchant(invitation.merchantId),
      email,
      firstName: details.firstName,
      lastName: details.lastName,
      phone: details.phone ?? undefined,
      instrument: {
        type: pm.type,
        brand: pm.brand ?? undefined,
        last4: pm.last4!,
        expiryMonth: pm.expiryMonth ?? undefined,
        expiryYear: pm.expiryYear ?? undefined,
        accountName: pm.accountName ?? undefined,
        bsb: pm.bsb ?? undefined,
      },
      planId: onboarding.planId!,
      ownMethodOnly,
      adoptSince: onboarding.completionStartedAt!.toISOString(),
      // A repeat takes over the turn its interrupted run held, and adopts only what this
      // invitation's own runs made, never what another invitation's concurrent completion made.
      enrolmentKey: invitation.id,
      productId: onboarding.productId!,
      answers: (onboarding.answers ?? []).map((a) => ({ questionId: a.questionId, textValue: a.textValue ?? undefined, optionIds: a.optionIds })),
    });
    return { memberId: member!.id, paymentMethodId: paymentMethod!.id, subscriptionId: subscription!.id };
  } catch (e) {
    if (e instanceof DomainError && e.code === 'unprocessable') throw DomainError.field('planId', 'The chosen plan is no longer offered; choose another.');
    if (e instanceof DomainError && e.code === 'subscription_exists') {
      const existingSubscriptionId = e.extensions.existingSubscriptionId;
      throw new DomainError('conflict', 'You already have a live subscription to this plan.', existingSubscriptionId ? { existingSubscriptionId } : {});
    }
    throw e;
  }
}
