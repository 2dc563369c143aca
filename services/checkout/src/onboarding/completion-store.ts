import type { MikroORM } from '@mikro-orm/postgresql';
import type { OnboardingCompletedEvent } from '@billing/contracts';
import { insertOutboxSql, queryPrepared, toOutboxJsonRow } from '@billing/service-runtime';
import { injectTraceHeaders } from '@billing/telemetry';
import type { Invitation } from '../invitations/invitation.js';
import { invitationOfRow, type InvitationRow } from '../invitations/invitation-row.js';
import type { Onboarding } from './onboarding.js';
import { onboardingOfRow, type OnboardingRow } from './onboarding-row.js';
import { ownOnboardingKey } from './wizard.js';

// Completion is onboarding's hot write, so its statements are written by hand and prepared: the
// ORM spent a locking read per table and a flush per transaction, at a round trip each. Each
// statement commits on its own: a completion holds its wizard by a lease (a column), never by a
// lock or a transaction held through its calls to billing.

/** A wizard as completion reads it: detached entities, changed only through this module's statements. */
export interface CompletionWizard {
  invitation: Invitation;
  onboarding: Onboarding;
}

const READ_SQL = `select to_jsonb(o) as onboarding, to_jsonb(i) as invitation
  from onboardings o join invitations i on i.id = o.invitation_id
 where o.invitation_id = $1 and o.account_id = $2`;

type WizardRow = { onboarding: OnboardingRow; invitation: InvitationRow };

function wizardOf(rows: WizardRow[], notFound: () => Error): CompletionWizard {
  const [row] = rows;
  if (!row) throw notFound();
  return { invitation: invitationOfRow(row.invitation), onboarding: onboardingOfRow(row.onboarding) };
}

/** The wizard of `ref`, read without a lock (one statement, outside any transaction); not_found as `findOwnOnboarding`. */
export async function readWizard(orm: MikroORM, ref: { accountId: string; invitationId: string }): Promise<CompletionWizard> {
  const { key, notFound } = ownOnboardingKey(ref);
  const { rows } = await queryPrepared<WizardRow>(orm, 'onboarding_completion_read', READ_SQL, [key.invitationId, key.accountId]);
  return wizardOf(rows, notFound);
}

/** A completion's claim on its wizard: the wizard as the claiming statement left it, and whether this run holds it. */
export interface TakenWizard extends CompletionWizard {
  /** This run holds the completion lease (until it records the completion or releases it). */
  leased: boolean;
  /** The lease's end as the row holds it (to the microsecond), for releasing only this run's lease. */
  leaseUntil: string | null;
}

/**
 * One statement, committed on its own: the wizard of `ref`, with its completion lease for this
 * run when the wizard is not completed and no other run holds an unexpired lease (an atomic
 * UPDATE decides between concurrent runs), and `completionStartedAt` set unless an earlier run
 * set it, so a re-run after an interruption knows since when what it finds in billing is its
 * own. not_found as `findOwnOnboarding`.
 */
export async function takeWizard(orm: MikroORM, ref: { accountId: string; invitationId: string }, leaseSeconds: number): Promise<TakenWizard> {
  const { key, notFound } = ownOnboardingKey(ref);
  const { rows } = await queryPrepared<WizardRow & { leased: boolean }>(
    orm,
    'onboarding_completion_take',
    `with leased as (
       update onboardings o set completion_lease_until = now() + make_interval(secs => $3), completion_started_at = coalesce(o.completion_started_at, now())
        where o.invitation_id = $1 and o.account_id = $2 and o.completed_at is null
          and (o.completion_lease_until is null or o.completion_lease_until < now())
       returning o.*)
     select to_jsonb(l) as onboarding, to_jsonb(i) as invitation, true as leased
       from leased l join invitations i on i.id = l.invitation_id
     union all
     select to_jsonb(o) as onboarding, to_jsonb(i) as invitation, false as leased
       from onboardings o join invitations i on i.id = o.invitation_id
      where o.invitation_id = $1 and o.account_id = $2 and not exists (select 1 from leased)`,
    [key.invitationId, key.accountId, leaseSeconds],
  );
  return { ...wizardOf(rows, notFound), leased: rows[0]?.leased ?? false, leaseUntil: rows[0]?.onboarding.completion_lease_until ?? null };
}

/**
 * Gives up this run's lease (`leaseUntil`, as `takeWizard` answered it) of a wizard it did not
 * complete, so the next run need not wait for it to expire; a lease another run took since this
 * one's expired is left alone.
 */
export async function releaseWizard(orm: MikroORM, invitationId: string, leaseUntil: string): Promise<void> {
  await queryPrepared(orm, 'onboarding_completion_release', `update onboardings set completion_lease_until = null where invitation_id = $1 and completion_lease_until = $2::timestamptz`, [invitationId, leaseUntil]);
}

/**
 * Records a completion, as one statement: the wizard's ids and `completedAt` (its lease
 * cleared), the invitation completed (what `Invitation.complete` changes), and
 * `onboarding.completed` in the outbox. All of it only with the wizard's first completion
 * (`completed_at` still null), so the event is never written twice; false when an earlier
 * completion had been recorded (a run whose lease expired while it called billing).
 */
export async function recordCompletion(orm: MikroORM, input: { invitation: Invitation; data: OnboardingCompletedEvent; now: Date }): Promise<boolean> {
  const { invitation, data, now } = input;
  const event = { ...toOutboxJsonRow(0, { type: 'onboarding.completed', merchantId: invitation.merchantId, data, traceContext: injectTraceHeaders(), occurredAt: now }), invitation_id: invitation.id };
  const { rows } = await queryPrepared<{ completed: number; invitations: number; events: number }>(
    orm,
    'onboarding_completion_write',
    `with completed as (
       update onboardings set member_id = $2, payment_method_id = $3, subscription_id = $4, completed_at = $5, updated_at = $5, completion_lease_until = null
        where invitation_id = $1 and completed_at is null
       returning invitation_id as id),
     invitation as (
       update invitations set member_id = $2, subscription_id = $4, completed_at = coalesce(completed_at, $5)
        where id = $1 and id in (select id from completed)
       returning 1),
     events as (
       ${insertOutboxSql('$6', { column: 'invitation_id', written: 'completed' })}
       returning 1)
     select (select count(*) from completed)::int as completed, (select count(*) from invitation)::int as invitations, (select count(*) from events)::int as events`,
    [invitation.id, data.memberId, data.paymentMethodId, data.subscriptionId, now.toISOString(), JSON.stringify([event])],
  );
  const [row] = rows;
  if (row!.completed === 0) return false;
  // Cannot happen (the statement completed the wizard, so the invitation and event go with it).
  if (row!.invitations !== 1 || row!.events !== 1) throw new Error(`onboarding completion wrote ${row!.completed} wizards, ${row!.invitations} invitations, ${row!.events} events`);
  return true;
}
