import type { MikroORM } from '@mikro-orm/postgresql';
import type { OnboardingCompletedEvent } from '@billing/contracts';
import { insertOutboxSql, queryPrepared, toOutboxJsonRow, type PreparedQuery } from '@billing/service-runtime';
import { injectTraceHeaders } from '@billing/telemetry';
import type { Invitation } from '../invitations/invitation.js';
import { invitationOfRow, type InvitationRow } from '../invitations/invitation-row.js';
import type { Onboarding } from './onboarding.js';
import { onboardingOfRow, type OnboardingRow } from './onboarding-row.js';
import { ownOnboardingKey } from './wizard.js';

// Completion is onboarding's hot write, so its statements are written by hand and prepared: the
// ORM spent a locking read per table and a flush per transaction, at a round trip each.

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

/** The wizard of `ref` with its row locked until `query`'s transaction ends; not_found as `findOwnOnboarding`. */
export async function lockWizard(query: PreparedQuery, ref: { accountId: string; invitationId: string }): Promise<CompletionWizard> {
  const { key, notFound } = ownOnboardingKey(ref);
  const { rows } = await query<WizardRow>('onboarding_completion_lock', `${READ_SQL}\n for update of o`, [key.invitationId, key.accountId]);
  return wizardOf(rows, notFound);
}

/**
 * Sets `completionStartedAt` unless an earlier run set it, committed on its own: a run calls it
 * before its first billing call, so a re-run after an interruption knows since when what it finds
 * in billing is its own.
 */
export async function markCompletionStarted(orm: MikroORM, invitationId: string, now: Date): Promise<void> {
  await queryPrepared(orm, 'onboarding_completion_start', `update onboardings set completion_started_at = $2 where invitation_id = $1 and completion_started_at is null`, [
    invitationId,
    now.toISOString(),
  ]);
}

/**
 * Records a completion in `query`'s transaction, as one statement: the wizard's ids and
 * `completedAt`, the invitation completed (what `Invitation.complete` changes), and
 * `onboarding.completed` in the outbox. The event is written only with the wizard's first
 * completion (`completed_at` still null), so never twice even without the caller's lock.
 */
export async function recordCompletion(
  query: PreparedQuery,
  input: { invitation: Invitation; data: OnboardingCompletedEvent; now: Date },
): Promise<void> {
  const { invitation, data, now } = input;
  const event = { ...toOutboxJsonRow(0, { type: 'onboarding.completed', merchantId: invitation.merchantId, data, traceContext: injectTraceHeaders(), occurredAt: now }), invitation_id: invitation.id };
  const { rows } = await query<{ completed: number; invitations: number; events: number }>(
    'onboarding_completion_write',
    `with completed as (
       update onboardings set member_id = $2, payment_method_id = $3, subscription_id = $4, completed_at = $5, updated_at = $5
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
  // Cannot happen (the caller holds the wizard's lock and saw it not completed); thrown, so the transaction rolls back.
  if (row!.completed !== 1 || row!.invitations !== 1 || row!.events !== 1) {
    throw new Error(`onboarding completion wrote ${row!.completed} wizards, ${row!.invitations} invitations, ${row!.events} events`);
  }
}
