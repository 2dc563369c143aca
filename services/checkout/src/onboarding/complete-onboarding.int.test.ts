import { randomUUID } from 'node:crypto';
import { describe, expect, it } from 'vitest';
import { DomainError } from '@billing/contracts';
import { openDatabase } from '@billing/service-runtime';
import { useMigratedDatabase } from '../../../../tests/support/migrated-database.js';
import { ENTITIES } from '../app.js';
import type { CheckoutBackends } from '../backends.js';
import { Invitation } from '../invitations/invitation.js';
import { MIGRATIONS } from '../migrations/index.js';
import { completeOnboarding } from './complete-onboarding.js';
import { READ_WIZARDS_SQL, RECORD_COMPLETIONS_SQL, readWizard, TAKE_WIZARDS_SQL } from './completion-store.js';
import { sequentialScansOfGenericPlan } from '../../../../tests/support/generic-plan.js';
import { Onboarding } from './onboarding.js';
import { findOwnOnboarding, updateOnboarding } from './wizard.js';

// Completing wizards against a real Postgres database of its own, with billing and identity faked
// by an in-memory billing that keeps what each step of an enrolment made (billing's own Enrol is
// tested against real Postgres in services/billing/src/enrolments): the exactly-once event,
// convergence after a run that died half way, concurrent calls answering the first's ids, and the
// completion lease (no lock or transaction held through billing).

const { orm, rows } = useMigratedDatabase({
  open: (url) => openDatabase({ url, schema: 'checkout', entities: ENTITIES }),
  schema: 'checkout',
  migrations: MIGRATIONS,
});

const QUESTION = { id: randomUUID(), text: 'Goal?', kind: 'Text', required: true, order: 1, options: [] };

type BillingCall = 'CreateMember' | 'ListPaymentMethods' | 'AddPaymentMethod' | 'CreateSubscription' | 'SaveMemberAnswers';

/**
 * Billing as far as completion uses it, in memory. `dieAfter(call)` makes the next such call take
 * its effect and then fail, as a run whose process died once billing had made it.
 */
function fakeBilling(plan: { id: string; productId: string }, questions: (typeof QUESTION)[] = [QUESTION]) {
  const members = new Map<string, string>();
  const methods: { id: string; memberId: string; type: string; brand?: string; last4: string; expiryMonth?: number; expiryYear?: number }[] = [];
  const subscriptions: { id: string; memberId: string; planId: string; createdAt: string }[] = [];
  const answers = new Map<string, unknown>();
  const dying = new Set<BillingCall>();
  const questionsAsked: string[] = [];
  let beforePlanRead: (() => Promise<void>) | undefined;
  let beforeMember: (() => Promise<void>) | undefined;
  const made = <T>(call: BillingCall, result: T): T => {
    if (dying.delete(call)) throw new Error(`died after ${call}`);
    return result;
  };
  const steps = {
    plans: {
      GetPlan: async (req: { id: string }) => {
        const before = beforePlanRead;
        beforePlanRead = undefined;
        await before?.();
        if (req.id !== plan.id) throw new DomainError('not_found', 'Plan not found.');
        return { id: plan.id, productId: plan.productId, isActive: true };
      },
    },
    // The product's questions; another product asks nothing.
    questions: {
      ListQuestions: async (req: { productId: string }) => {
        questionsAsked.push(req.productId);
        return { items: req.productId === plan.productId ? questions : [] };
      },
    },
    customers: { GetCustomerAccount: async () => ({ email: 'from-identity@example.com' }) },
    members: {
      CreateMember: async (req: { email: string }) => {
        const before = beforeMember;
        beforeMember = undefined;
        await before?.();
        const existing = members.get(req.email);
        const id = existing ?? randomUUID();
        members.set(req.email, id);
        return made('CreateMember', { member: { id }, created: !existing });
      },
    },
    paymentMethods: {
      ListPaymentMethods: async (req: { memberId: string }) => made('ListPaymentMethods', { items: methods.filter((m) => m.memberId === req.memberId) }),
      AddPaymentMethod: async (req: { memberId: string; type: string; brand?: string; last4: string; expiryMonth?: number; expiryYear?: number }) => {
        const pm = { id: randomUUID(), memberId: req.memberId, type: req.type, brand: req.brand, last4: req.last4, expiryMonth: req.expiryMonth, expiryYear: req.expiryYear };
        methods.push(pm);
        return made('AddPaymentMethod', { paymentMethod: { id: pm.id } });
      },
    },
    subscriptions: {
      CreateSubscription: async (req: { memberId: string; planId: string }) => {
        const live = subscriptions.find((s) => s.memberId === req.memberId && s.planId === req.planId);
        if (live) throw new DomainError('subscription_exists', 'A live subscription already exists.', { existingSubscriptionId: live.id });
        const sub = { id: randomUUID(), memberId: req.memberId, planId: req.planId, createdAt: new Date().toISOString() };
        subscriptions.push(sub);
        return made('CreateSubscription', { id: sub.id });
      },
    },
    answers: {
      SaveMemberAnswers: async (req: { memberId: string; answers: unknown }) => {
        answers.set(req.memberId, req.answers);
        return made('SaveMemberAnswers', {});
      },
    },
  };
  // The enrolment as billing's Enrol makes it (see enrolments.proto), from the steps above, so
  // that each step can die on its own.
  const enrol = async (req: { email: string; instrument: { type: string; last4: string; brand?: string; expiryMonth?: number; expiryYear?: number }; planId: string; adoptSince: string; productId: string; answers: unknown[] }) => {
    const { member, created } = await steps.members.CreateMember(req);
    const memberId = member.id;
    const same = created ? undefined : (await steps.paymentMethods.ListPaymentMethods({ memberId })).items.find((m) => m.type === req.instrument.type && m.last4 === req.instrument.last4);
    const paymentMethod = same ?? (await steps.paymentMethods.AddPaymentMethod({ memberId, ...req.instrument })).paymentMethod;
    let subscriptionId: string;
    try {
      subscriptionId = (await steps.subscriptions.CreateSubscription({ memberId, planId: req.planId })).id;
    } catch (e) {
      const existing = e instanceof DomainError ? subscriptions.find((x) => x.id === e.extensions.existingSubscriptionId) : undefined;
      if (!existing || new Date(existing.createdAt) < new Date(req.adoptSince)) throw e;
      subscriptionId = existing.id;
    }
    if (req.answers.length > 0 || !created) await steps.answers.SaveMemberAnswers({ memberId, answers: req.answers });
    return { member, paymentMethod, subscription: { id: subscriptionId } };
  };
  const backends = { ...steps, enrolments: { Enrol: enrol } } as unknown as CheckoutBackends;
  return {
    backends,
    members,
    methods,
    subscriptions,
    answers,
    questionsAsked,
    dieAfter: (call: BillingCall) => void dying.add(call),
    /** Runs `fn` when the next GetPlan arrives, before answering it: what happens while a run validates. */
    whileValidating: (fn: () => Promise<void>) => void (beforePlanRead = fn),
    /** Runs `fn` when the next CreateMember arrives, before making the member: what happens while a run is in billing. */
    whileInBilling: (fn: () => Promise<void>) => void (beforeMember = fn),
  };
}

/** An accepted invitation whose wizard is filled in and ready to complete, and a billing to complete it in. */
async function readyWizard(opts: { email?: string | null; answers?: []; waitMs?: number } = {}) {
  const plan = { id: randomUUID(), productId: randomUUID() };
  const accountId = randomUUID();
  const { invitation } = Invitation.issue({ merchantId: randomUUID(), firstName: 'Ada', lastName: 'Lovelace', email: opts.email === undefined ? 'ada@example.com' : opts.email, phone: null, expiresInDays: 7 });
  invitation.accept(accountId);
  const onboarding = Object.assign(Onboarding.start(invitation.id, accountId), {
    details: { firstName: 'Ada', lastName: 'Lovelace', phone: null, addressLine1: null, city: null, state: null, postCode: null, country: null },
    paymentMethod: { type: 'Card' as const, brand: 'Visa', last4: '4242', expiryMonth: 12, expiryYear: 2099, accountName: null, bsb: null },
    planId: plan.id,
    productId: plan.productId,
    answers: opts.answers ?? [{ questionId: QUESTION.id, textValue: 'Fitness', optionIds: [] }],
  });
  await orm().em.fork().persist(invitation).flush();
  await orm().em.fork().persist(onboarding).flush();
  // A wizard without answers is for a product that asks nothing.
  const billing = fakeBilling(plan, opts.answers ? [] : [QUESTION]);
  const ref = { accountId, invitationId: invitation.id };
  return { billing, ref, plan, complete: () => completeOnboarding({ orm: orm(), backends: billing.backends, completionWaitMs: opts.waitMs }, ref) };
}

/**
 * Whether the wizard's row is free to lock now (tried without waiting). The interleavings below
 * need validation to run without the lock; a completion that validated under it would fail here
 * instead of waiting for itself.
 */
async function isUnlocked(invitationId: string): Promise<boolean> {
  return (await rows(`select 1 from checkout.onboardings where invitation_id = ? for update skip locked`, [invitationId])).length === 1;
}

async function eventsOf(invitationId: string) {
  return rows<{ merchant_id: string; data: Record<string, unknown> }>(`select merchant_id, data from checkout.outbox where type = 'onboarding.completed' and data->>'invitationId' = ?`, [invitationId]);
}

describe('readWizard', () => {
  it('reads the invitation and wizard the ORM reads, and not_found for another account', async () => {
    const { ref } = await readyWizard({ email: null });
    await rows(`update checkout.onboardings set completion_started_at = now() where invitation_id = ?`, [ref.invitationId]);
    const read = await readWizard(orm(), { accountId: ref.accountId.toUpperCase(), invitationId: ref.invitationId.toUpperCase() });
    const found = await findOwnOnboarding(orm().em.fork(), ref);
    expect({ ...read.invitation }).toEqual({ ...found.invitation });
    expect({ ...read.onboarding }).toEqual({ ...found.onboarding });
    expect(read.onboarding.completionStartedAt).toBeInstanceOf(Date);
    await expect(readWizard(orm(), { ...ref, accountId: randomUUID() })).rejects.toMatchObject({ code: 'not_found' });
  });
});

describe('completeOnboarding', () => {
  it('makes one of each in billing, completes the invitation and records onboarding.completed once; a second call answers the same ids', async () => {
    const { billing, ref, plan, complete } = await readyWizard({ email: null });
    const ids = await complete();
    expect(await complete()).toEqual(ids);

    expect([...billing.members]).toEqual([['from-identity@example.com', ids.memberId]]);
    expect(billing.methods.map((m) => m.id)).toEqual([ids.paymentMethodId]);
    expect(billing.subscriptions.map((s) => s.id)).toEqual([ids.subscriptionId]);
    const invitation = await orm().em.fork().findOneOrFail(Invitation, { id: ref.invitationId });
    expect(invitation).toMatchObject({ memberId: ids.memberId, subscriptionId: ids.subscriptionId });
    expect(invitation.status()).toBe('Completed');
    const onboarding = await orm().em.fork().findOneOrFail(Onboarding, { invitationId: ref.invitationId });
    expect(onboarding).toMatchObject({ ...ids, completedAt: invitation.completedAt });
    expect(onboarding.step([])).toBe('Done');
    expect(await eventsOf(ref.invitationId)).toEqual([
      {
        merchant_id: invitation.merchantId,
        data: { invitationId: ref.invitationId, customerAccountId: ref.accountId, ...ids, planId: plan.id, email: 'from-identity@example.com' },
      },
    ]);
  });

  it.each(['CreateMember', 'AddPaymentMethod', 'CreateSubscription', 'SaveMemberAnswers'] as const)(
    'converges after a run that died once billing had done %s: one member, method and subscription, and one event',
    async (call) => {
      const { billing, ref, complete } = await readyWizard();
      billing.dieAfter(call);
      await expect(complete()).rejects.toThrow(`died after ${call}`);
      const [{ started }] = await rows<{ started: Date }>(`select completion_started_at as started from checkout.onboardings where invitation_id = ?`, [ref.invitationId]);
      expect(started).not.toBeNull();
      expect(await eventsOf(ref.invitationId)).toEqual([]);

      const ids = await complete();
      expect([...billing.members.values()]).toEqual([ids.memberId]);
      expect(billing.methods.map((m) => m.id)).toEqual([ids.paymentMethodId]);
      expect(billing.subscriptions.map((s) => s.id)).toEqual([ids.subscriptionId]);
      expect(billing.answers.has(ids.memberId)).toBe(true);
      expect(await eventsOf(ref.invitationId)).toHaveLength(1);
      expect(await rows(`select completion_started_at as started from checkout.onboardings where invitation_id = ?`, [ref.invitationId])).toEqual([{ started }]);
    },
  );

  it('asks billing to save no answers for a member it has just created when the wizard has none, and does for a member that already existed', async () => {
    const fresh = await readyWizard({ answers: [] });
    const ids = await fresh.complete();
    expect(fresh.billing.answers.has(ids.memberId)).toBe(false);

    // A re-run after a death once the member was made: the member exists, so its answers are replaced.
    const rerun = await readyWizard({ answers: [] });
    rerun.billing.dieAfter('CreateMember');
    await expect(rerun.complete()).rejects.toThrow('died after CreateMember');
    const again = await rerun.complete();
    expect(rerun.billing.answers.get(again.memberId)).toEqual([]);
  });

  it('answers concurrent calls with the ids of the one that completed, making one of each and one event', async () => {
    const { billing, ref, complete } = await readyWizard();
    const results = await Promise.all(Array.from({ length: 5 }, () => complete()));
    expect(new Set(results.map((r) => JSON.stringify(r))).size).toBe(1);
    expect(billing.members.size).toBe(1);
    expect(billing.methods).toHaveLength(1);
    expect(billing.subscriptions).toHaveLength(1);
    expect(await eventsOf(ref.invitationId)).toHaveLength(1);
  });

  it('adds no second payment method when a concurrent run died after adding one while this one waited', async () => {
    const { billing, ref, complete } = await readyWizard();
    // This run has read the wizard before any run marked its completion started, as if it were the
    // first; another run then marks it, adds the method and dies, leaving no trace in the wizard.
    let other: unknown;
    billing.whileValidating(async () => {
      expect(await isUnlocked(ref.invitationId)).toBe(true);
      billing.dieAfter('AddPaymentMethod');
      other = await complete().catch((e: unknown) => e);
    });
    const ids = await complete();
    expect(other).toMatchObject({ message: 'died after AddPaymentMethod' });
    expect(billing.methods.map((m) => m.id)).toEqual([ids.paymentMethodId]);
    expect(billing.subscriptions.map((s) => s.id)).toEqual([ids.subscriptionId]);
    expect(await eventsOf(ref.invitationId)).toHaveLength(1);
  });

  it('checks the wizard as taken, not only as first read: answers emptied meanwhile are refused before billing is called', async () => {
    const { billing, ref, complete } = await readyWizard();
    // A save of the answers step, committed while the run validates the wizard as it first read it.
    billing.whileValidating(async () => {
      expect(await isUnlocked(ref.invitationId)).toBe(true);
      await rows(`update checkout.onboardings set answers = '[]' where invitation_id = ?`, [ref.invitationId]);
    });
    const refused = await complete().catch((e: unknown) => e);
    expect(refused).toBeInstanceOf(DomainError);
    expect(refused).toMatchObject({ code: 'validation_failed', extensions: { errors: { [`answers.${QUESTION.id}`]: ['This question requires an answer.'] } } });
    expect(billing.members.size).toBe(0);
    expect(await eventsOf(ref.invitationId)).toEqual([]);
  });
  it('holds no transaction and no lock while it calls billing, and refuses wizard edits meanwhile', async () => {
    const { billing, ref, complete } = await readyWizard();
    let during: { inTransaction: number; unlocked: boolean; edit: unknown } | undefined;
    billing.whileInBilling(async () => {
      const [{ n }] = await rows<{ n: number }>(`select count(*)::int as n from pg_stat_activity where datname = current_database() and state like 'idle in transaction%'`);
      const edit = await updateOnboarding({ orm: orm(), backends: billing.backends }, ref, (o) => void (o.planId = null)).catch((e: unknown) => e);
      during = { inTransaction: n, unlocked: await isUnlocked(ref.invitationId), edit };
    });
    const ids = await complete();
    expect(during).toEqual({ inTransaction: 0, unlocked: true, edit: expect.objectContaining({ code: 'conflict', message: 'This onboarding is being completed.' }) });
    const [row] = await rows<{ lease: Date | null; plan_id: string | null }>(`select completion_lease_until as lease, plan_id from checkout.onboardings where invitation_id = ?`, [ref.invitationId]);
    expect(row).toMatchObject({ lease: null });
    expect(row!.plan_id).not.toBeNull();
    expect(billing.subscriptions.map((s) => s.id)).toEqual([ids.subscriptionId]);
  });

  it('waits for a run holding the wizard and answers conflict once it has waited its bound; takes over once that run\'s lease has expired', async () => {
    const { billing, ref, complete } = await readyWizard({ waitMs: 300 });
    // A run that took the lease and died (its process killed) before calling billing.
    await rows(`update checkout.onboardings set completion_lease_until = now() + interval '1 hour', completion_started_at = now() where invitation_id = ?`, [ref.invitationId]);
    const started = Date.now();
    await expect(complete()).rejects.toMatchObject({ code: 'conflict', message: 'Another completion of this onboarding is in progress; retry shortly.' });
    expect(Date.now() - started).toBeGreaterThanOrEqual(300);
    expect(billing.members.size).toBe(0);

    await rows(`update checkout.onboardings set completion_lease_until = now() - interval '1 second' where invitation_id = ?`, [ref.invitationId]);
    const ids = await complete();
    expect(billing.subscriptions.map((s) => s.id)).toEqual([ids.subscriptionId]);
    expect(await eventsOf(ref.invitationId)).toHaveLength(1);
  });

  it('gives up its lease when it fails, so the next run need not wait for it', async () => {
    const { billing, ref, complete } = await readyWizard({ waitMs: 0 });
    billing.dieAfter('CreateSubscription');
    await expect(complete()).rejects.toThrow('died after CreateSubscription');
    expect(await rows(`select completion_lease_until as lease from checkout.onboardings where invitation_id = ?`, [ref.invitationId])).toEqual([{ lease: null }]);
    const ids = await complete();
    expect(billing.subscriptions.map((s) => s.id)).toEqual([ids.subscriptionId]);
  });
  it('asks for the plan and the questions of the product saved with it at once, and for the plan\'s own product\'s when that differs', async () => {
    const saved = await readyWizard();
    await saved.complete();
    expect(saved.billing.questionsAsked).toEqual([saved.plan.productId]);

    // The wizard saved another product beside the plan: its (absent) questions are not the plan's.
    const other = await readyWizard();
    await rows(`update checkout.onboardings set product_id = ?, answers = '[]' where invitation_id = ?`, [randomUUID(), other.ref.invitationId]);
    const refused = await other.complete().catch((e: unknown) => e);
    expect(refused).toMatchObject({ code: 'validation_failed', extensions: { errors: { [`answers.${QUESTION.id}`]: ['This question requires an answer.'] } } });
    expect(other.billing.questionsAsked).toHaveLength(2);
    expect(other.billing.questionsAsked[1]).toBe(other.plan.productId);
  });
  it('completes wizards arriving together each on its own, with one event each; another account\'s is not_found alone', async () => {
    const wizards = await Promise.all(Array.from({ length: 8 }, () => readyWizard()));
    const stranger = { ...wizards[0]!.ref, accountId: randomUUID() };
    const [foreign, ...answers] = await Promise.allSettled([completeOnboarding({ orm: orm(), backends: wizards[0]!.billing.backends }, stranger), ...wizards.map((w) => w.complete())]);
    expect(foreign).toMatchObject({ status: 'rejected', reason: { code: 'not_found' } });
    for (const [n, w] of wizards.entries()) {
      const answer = answers[n]!;
      expect(answer.status).toBe('fulfilled');
      const ids = (answer as PromiseFulfilledResult<{ subscriptionId: string }>).value;
      expect(w.billing.subscriptions.map((s) => s.id)).toEqual([ids.subscriptionId]);
      const events = await eventsOf(w.ref.invitationId);
      expect(events.map((e) => e.data.subscriptionId)).toEqual([ids.subscriptionId]);
      expect(await rows(`select completion_lease_until as lease from checkout.onboardings where invitation_id = ?`, [w.ref.invitationId])).toEqual([{ lease: null }]);
    }
  });
});

describe('the statements on tables of many wizards', () => {
  it('find their wizards and invitations by index: the generic plans (named statements keep them) scan no table', async () => {
    await rows(
      `insert into checkout.invitations (id, merchant_id, token_hash, first_name, last_name, email, expires_at, created_at, account_id, accepted_at)
       select gen_random_uuid(), gen_random_uuid(), md5(g::text) || md5(g::text), 'Ida', 'Invitee', g || '@example.com', now() + interval '7 days', now(), gen_random_uuid(), now()
         from generate_series(1, 20000) g`,
    );
    await rows(`insert into checkout.onboardings (invitation_id, account_id, updated_at)
       select i.id, i.account_id, now() from checkout.invitations i
       where i.last_name = 'Invitee' and not exists (select 1 from checkout.onboardings o where o.invitation_id = i.id)`);
    await rows('analyze checkout.invitations');
    await rows('analyze checkout.onboardings');
    const [a, b] = [randomUUID(), randomUUID()];
    const ids = `{${a},${b}}`;
    const keys = JSON.stringify([a, b].map((id, i) => ({ i, invitation_id: id, account_id: randomUUID(), lease_seconds: 30 })));
    expect(await sequentialScansOfGenericPlan(orm(), 'checkout', READ_WIZARDS_SQL, [keys, ids])).toEqual([]);
    expect(await sequentialScansOfGenericPlan(orm(), 'checkout', TAKE_WIZARDS_SQL, [keys, ids])).toEqual([]);
    const completions = JSON.stringify([a, b].map((id) => ({ id, member_id: randomUUID(), payment_method_id: randomUUID(), subscription_id: randomUUID(), completed_at: new Date().toISOString() })));
    expect(await sequentialScansOfGenericPlan(orm(), 'checkout', RECORD_COMPLETIONS_SQL, [completions, '[]', ids])).toEqual([]);
  }, 30_000);
});
