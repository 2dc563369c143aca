import { LockMode, type EntityManager, type MikroORM } from '@mikro-orm/postgresql';
import { DomainError, isUuidText } from '@billing/contracts';
import { scopeOfMerchant } from '@billing/service-runtime';
import type { CheckoutBackends } from '../backends.js';
import { merchantNameOf } from '../invitations/create-invitation.js';
import { hashInvitationToken, Invitation } from '../invitations/invitation.js';
import { Onboarding } from './onboarding.js';

export interface WizardDeps {
  orm: MikroORM;
  backends: CheckoutBackends;
  /** How long a completion holds its wizard (default 30 s): a run that died half way holds it no longer. */
  completionLeaseSeconds?: number;
  /** How long a completion waits for another run of the same wizard before answering conflict (default 3 s). */
  completionWaitMs?: number;
  /** Test only: kills the process after a completion step (`onboarding-after-enrolment`), see CHECKOUT_FAULT_FILE. */
  fault?: (step: string) => void;
}

/** The invitation a link's token names: unknown not_found. */
export async function findByToken(em: EntityManager, token: string, opts: { lock?: boolean } = {}): Promise<Invitation> {
  const invitation = await em.findOne(Invitation, { tokenHash: hashInvitationToken(token) }, opts.lock ? { lockMode: LockMode.PESSIMISTIC_WRITE } : {});
  if (!invitation) throw new DomainError('not_found', 'Invitation not found.');
  return invitation;
}

/**
 * The key of the wizard `ref` names (lower case), and the error for one that is not the caller's;
 * an id that is no UUID is not_found at once.
 */
export function ownOnboardingKey(ref: { accountId: string; invitationId: string }) {
  const notFound = () => new DomainError('not_found', 'Onboarding not found.');
  if (!isUuidText(ref.invitationId) || !isUuidText(ref.accountId)) throw notFound();
  return { key: { invitationId: ref.invitationId.toLowerCase(), accountId: ref.accountId.toLowerCase() }, notFound };
}

/**
 * The invitation and wizard of `invitationId` when `accountId` accepted it; any other (unknown,
 * not accepted, accepted by another customer) is not_found, alike.
 */
export async function findOwnOnboarding(
  em: EntityManager,
  ref: { accountId: string; invitationId: string },
  opts: { lock?: boolean } = {},
): Promise<{ invitation: Invitation; onboarding: Onboarding }> {
  const { key, notFound } = ownOnboardingKey(ref);
  const lock = opts.lock ? { lockMode: LockMode.PESSIMISTIC_WRITE } : {};
  const onboarding = await em.findOne(Onboarding, key, lock);
  if (!onboarding) throw notFound();
  const invitation = await em.findOneOrFail(Invitation, { id: key.invitationId });
  return { invitation, onboarding };
}

/** A write to the wizard: the invitation must still be usable (gone otherwise), and not completed nor being completed (conflict). */
export async function updateOnboarding(deps: WizardDeps, ref: { accountId: string; invitationId: string }, change: (o: Onboarding, invitation: Invitation) => Promise<void> | void): Promise<void> {
  await deps.orm.em.fork().transactional(async (em) => {
    const { invitation, onboarding } = await findOwnOnboarding(em, ref, { lock: true });
    if (onboarding.completedAt) throw new DomainError('conflict', 'This onboarding is already completed.');
    if (onboarding.completionLeaseUntil && onboarding.completionLeaseUntil > new Date()) throw new DomainError('conflict', 'This onboarding is being completed.');
    invitation.assertUsable();
    await change(onboarding, invitation);
    onboarding.touch();
  });
}

/** How many of the merchant's active plans the wizard offers (one page). */
const OFFERED_PLANS = 200;

/** The merchant's active plans, as the wizard offers them. */
export async function activePlansOf(backends: CheckoutBackends, merchantId: string) {
  const page = await backends.plans.ListPlans({ scope: scopeOfMerchant(merchantId), isActive: true, page: 1, pageSize: OFFERED_PLANS });
  return page.items.map((p) => ({
    id: p.id,
    productId: p.productId,
    name: p.name,
    amountMinor: p.amountMinor,
    currency: p.currency,
    interval: p.interval,
    intervalCount: p.intervalCount,
    trialDays: p.trialDays,
  }));
}

/** The merchant's plan `planId`, or null when it has none of that id. */
async function findPlan(backends: CheckoutBackends, merchantId: string, planId: string) {
  return backends.plans.GetPlan({ scope: scopeOfMerchant(merchantId), id: planId }).catch((e: unknown) => {
    if (e instanceof DomainError && e.code === 'not_found') return null;
    throw e;
  });
}

/**
 * Whether `planId` is still an active plan of the merchant, given its `offered` active plans: a
 * full page of them may not hold it, so only then is the plan read by its id.
 */
async function isPlanOffered(backends: CheckoutBackends, merchantId: string, planId: string, offered: readonly { id: string }[]): Promise<boolean> {
  if (offered.some((p) => p.id === planId)) return true;
  if (offered.length < OFFERED_PLANS) return false;
  return (await findPlan(backends, merchantId, planId))?.isActive ?? false;
}

/** A plan the merchant offers now, or validation_failed naming `planId`. */
export async function requireActivePlan(backends: CheckoutBackends, merchantId: string, planId: string) {
  const plan = await findPlan(backends, merchantId, planId);
  if (!plan) throw DomainError.field('planId', 'Unknown plan.');
  if (!plan.isActive) throw DomainError.field('planId', 'This plan is no longer offered.');
  return plan;
}

export async function previewInvitation(deps: WizardDeps, token: string) {
  const invitation = await findByToken(deps.orm.em.fork(), token);
  if (invitation.status() !== 'Completed') invitation.assertUsable();
  const merchantName = await merchantNameOf(deps.backends, invitation.merchantId);
  let accountState = 'None';
  if (invitation.email) {
    const account = await deps.backends.customers.EnsureCustomerAccount({ email: invitation.email, firstName: invitation.firstName, lastName: invitation.lastName });
    accountState = account.claimed ? 'Claimed' : 'Unclaimed';
  }
  const m = invitation.toMessage();
  return { invitationId: m.id, merchantName, firstName: m.firstName, lastName: m.lastName, email: m.email, phone: m.phone, expiresAt: m.expiresAt, accountState, status: m.status };
}

/** Binds the invitation to the customer (once, for good) and opens its wizard. */
export async function acceptInvitation(deps: WizardDeps, accountId: string, token: string) {
  const invitation = await deps.orm.em.fork().transactional(async (em) => {
    const found = await findByToken(em, token, { lock: true });
    found.accept(accountId.toLowerCase());
    if (!(await em.findOne(Onboarding, { invitationId: found.id }))) em.persist(Onboarding.start(found.id, found.accountId!));
    return found;
  });
  const [merchantName, plans] = await Promise.all([merchantNameOf(deps.backends, invitation.merchantId), activePlansOf(deps.backends, invitation.merchantId)]);
  const m = invitation.toMessage();
  return { invitationId: m.id, merchantName, firstName: m.firstName, lastName: m.lastName, email: m.email, phone: m.phone, expiresAt: m.expiresAt, plans };
}

export async function getOnboardingState(deps: WizardDeps, ref: { accountId: string; invitationId: string }) {
  const { invitation, onboarding } = await findOwnOnboarding(deps.orm.em.fork(), ref);
  const [merchantName, plans, questions] = await Promise.all([
    merchantNameOf(deps.backends, invitation.merchantId),
    activePlansOf(deps.backends, invitation.merchantId),
    onboarding.productId ? deps.backends.questions.ListQuestions({ scope: scopeOfMerchant(invitation.merchantId), productId: onboarding.productId }).then((l) => l.items) : Promise.resolve([]),
  ]);
  const planOffered = !onboarding.planId || Boolean(onboarding.completedAt) || (await isPlanOffered(deps.backends, invitation.merchantId, onboarding.planId, plans));
  const m = invitation.toMessage();
  const opt = <T>(v: T | null) => v ?? undefined;
  const details = onboarding.details;
  const pm = onboarding.paymentMethod;
  return {
    invitationId: m.id,
    status: m.status,
    step: onboarding.step(questions, planOffered),
    merchantName,
    firstName: m.firstName,
    lastName: m.lastName,
    email: m.email,
    phone: m.phone,
    expiresAt: m.expiresAt,
    details: details
      ? { firstName: details.firstName, lastName: details.lastName, phone: opt(details.phone), addressLine1: opt(details.addressLine1), city: opt(details.city), state: opt(details.state), postCode: opt(details.postCode), country: opt(details.country) }
      : undefined,
    paymentMethod: pm
      ? { type: pm.type, brand: opt(pm.brand), last4: pm.last4 ?? '', expiryMonth: opt(pm.expiryMonth), expiryYear: opt(pm.expiryYear), accountName: opt(pm.accountName), bsb: opt(pm.bsb) }
      : undefined,
    planId: opt(onboarding.planId),
    answersSaved: onboarding.answers !== null,
    answers: (onboarding.answers ?? []).map((a) => ({ questionId: a.questionId, textValue: opt(a.textValue), optionIds: a.optionIds })),
    plans,
    questions: questions.map((q) => ({ id: q.id, text: q.text, kind: q.kind, required: q.required, order: q.order, options: q.options })),
    memberId: opt(onboarding.memberId),
    paymentMethodId: opt(onboarding.paymentMethodId),
    subscriptionId: opt(onboarding.subscriptionId),
    completedAt: onboarding.completedAt?.toISOString(),
  };
}
