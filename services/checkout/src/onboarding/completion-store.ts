import type { MikroORM } from '@mikro-orm/postgresql';
import type { OnboardingCompletedEvent } from '@billing/contracts';
import { Batcher, insertOutboxSql, queryPrepared, rowsByItem, toOutboxJsonRow } from '@billing/service-runtime';
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

/** A completion's claim on its wizard: the wizard as the claiming statement left it, and whether this run holds it. */
export interface TakenWizard extends CompletionWizard {
  /** This run holds the completion lease (until it records the completion or releases it). */
  leased: boolean;
  /** The lease's end as the row holds it (to the microsecond), for releasing only this run's lease. */
  leaseUntil: string | null;
}

type WizardRow = { i: number; onboarding: OnboardingRow; invitation: InvitationRow };
type Key = { invitationId: string; accountId: string };
interface Completion {
  invitation: Invitation;
  data: OnboardingCompletedEvent;
  now: Date;
}

const wizardOfRow = (row: WizardRow): CompletionWizard => ({ invitation: invitationOfRow(row.invitation), onboarding: onboardingOfRow(row.onboarding) });
/** The invitation ids of a batch (uuids: `ownOnboardingKey`), the array parameter of each statement below. */
const invitationIdsOf = (keys: readonly Key[]) => keys.map((k) => k.invitationId);
const keysJson = <K extends Key>(keys: readonly K[], extra: (k: K) => object = () => ({})) =>
  JSON.stringify(keys.map((k, i) => ({ i, invitation_id: k.invitationId, account_id: k.accountId, ...extra(k) })));

// The completion's statements. Each also names its rows by the batch's invitation ids
// (`= any($n)`): joined to the recordset alone (which the planner takes for 100 rows), their
// generic plans (they are named, prepared once per connection) were hash joins over scans of every
// wizard and invitation, a read of the whole tables per batch once they held some thousands of
// rows (found with auto_explain on the writes bench; tested in complete-onboarding.int.test.ts).
/** $1: the keys (i, invitation_id, account_id) as JSON; $2: the invitation ids. */
export const READ_WIZARDS_SQL = `select r.i, to_jsonb(o) as onboarding, to_jsonb(inv) as invitation
         from jsonb_to_recordset($1::jsonb) as r(i int, invitation_id uuid, account_id uuid)
         join onboardings o on o.invitation_id = r.invitation_id and o.account_id = r.account_id and o.invitation_id = any($2::uuid[])
         join invitations inv on inv.id = o.invitation_id and inv.id = any($2::uuid[])`;
/** $1: the keys with lease_seconds as JSON; $2: the invitation ids. */
export const TAKE_WIZARDS_SQL = `with r as (select * from jsonb_to_recordset($1::jsonb) as r(i int, invitation_id uuid, account_id uuid, lease_seconds int)),
         inv as materialized (
           select v.* from invitations v where v.id = any($2::uuid[]) order by v.id for share of v),
         leased as (
           update onboardings o set completion_lease_until = now() + make_interval(secs => r.lease_seconds), completion_started_at = coalesce(o.completion_started_at, now())
             from r
            where o.invitation_id = r.invitation_id and o.account_id = r.account_id and o.invitation_id = any($2::uuid[]) and o.completed_at is null
              and (o.completion_lease_until is null or o.completion_lease_until < now())
              and exists (select 1 from inv where inv.id = o.invitation_id and inv.revoked_at is null)
           returning r.i, o.*)
         select l.i, to_jsonb(l) - 'i' as onboarding, to_jsonb(inv) as invitation, true as leased
           from leased l join inv on inv.id = l.invitation_id
         union all
         select r.i, to_jsonb(o) as onboarding, to_jsonb(inv) as invitation, false as leased
           from r join onboardings o on o.invitation_id = r.invitation_id and o.account_id = r.account_id and o.invitation_id = any($2::uuid[])
           join inv on inv.id = o.invitation_id
          where r.i not in (select i from leased)`;
/** $1: the completions as JSON; $2: their `onboarding.completed` outbox rows as JSON; $3: the invitation ids. */
export const RECORD_COMPLETIONS_SQL = `with c as (
           select * from jsonb_to_recordset($1::jsonb) as c(id uuid, member_id uuid, payment_method_id uuid, subscription_id uuid, completed_at timestamptz)),
         completed as (
           update onboardings o set member_id = c.member_id, payment_method_id = c.payment_method_id, subscription_id = c.subscription_id,
                  completed_at = c.completed_at, updated_at = c.completed_at, completion_lease_until = null
             from c
            where o.invitation_id = c.id and o.invitation_id = any($3::uuid[]) and o.completed_at is null
           returning o.invitation_id as id),
         invitation as (
           update invitations v set member_id = c.member_id, subscription_id = c.subscription_id, completed_at = coalesce(v.completed_at, c.completed_at)
             from c
            where v.id = c.id and v.id = any($3::uuid[]) and v.id in (select id from completed)
           returning 1),
         events as (
           ${insertOutboxSql('$2', { column: 'invitation_id', written: 'completed' })}
           returning 1)
         select coalesce((select json_agg(id) from completed), '[]') as completed, (select count(*) from invitation)::int as invitations, (select count(*) from events)::int as events`;

/**
 * The statements of the completions that arrive together, one per batch each (per ORM): reads,
 * lease takes and records. Two takes or records of one wizard never share a batch.
 */
function statementsOf(orm: MikroORM) {
  const reads = new Batcher<Key, WizardRow | undefined>(async (keys) => {
    const { rows } = await queryPrepared<WizardRow>(
      orm,
      'onboarding_completion_read_batch',
      READ_WIZARDS_SQL,
      [keysJson(keys), invitationIdsOf(keys)],
    );
    return rowsByItem(keys.length, rows);
  });
  const takes = new Batcher<Key & { leaseSeconds: number }, (WizardRow & { leased: boolean }) | undefined>(
    async (keys) => {
      const { rows } = await queryPrepared<WizardRow & { leased: boolean }>(
        orm,
        'onboarding_completion_take_batch',
        TAKE_WIZARDS_SQL,
        [keysJson(keys, (k) => ({ lease_seconds: k.leaseSeconds })), invitationIdsOf(keys)],
      );
      return rowsByItem(keys.length, rows);
    },
    { keyOf: (k) => k.invitationId },
  );
  const records = new Batcher<Completion, boolean>(
    async (batch) => {
      const events = batch.map(({ invitation, data, now }, seq) => ({
        ...toOutboxJsonRow(seq, { type: 'onboarding.completed', merchantId: invitation.merchantId, data, traceContext: injectTraceHeaders(), occurredAt: now }),
        invitation_id: invitation.id,
      }));
      const { rows } = await queryPrepared<{ completed: string[]; invitations: number; events: number }>(
        orm,
        'onboarding_completion_write_batch',
        RECORD_COMPLETIONS_SQL,
        [
          JSON.stringify(batch.map(({ invitation, data, now }) => ({ id: invitation.id, member_id: data.memberId, payment_method_id: data.paymentMethodId, subscription_id: data.subscriptionId, completed_at: now.toISOString() }))),
          JSON.stringify(events),
          batch.map(({ invitation }) => invitation.id),
        ],
      );
      const [row] = rows;
      const completed = new Set(row!.completed);
      // Cannot happen (the statement completed those wizards, so their invitations and events go with them).
      if (row!.invitations !== completed.size || row!.events !== completed.size) {
        throw new Error(`onboarding completion wrote ${completed.size} wizards, ${row!.invitations} invitations, ${row!.events} events`);
      }
      return batch.map((c) => completed.has(c.invitation.id));
    },
    { keyOf: (c) => c.invitation.id },
  );
  return { reads, takes, records };
}

const statements = new WeakMap<MikroORM, ReturnType<typeof statementsOf>>();
function statementsFor(orm: MikroORM): ReturnType<typeof statementsOf> {
  let found = statements.get(orm);
  if (!found) statements.set(orm, (found = statementsOf(orm)));
  return found;
}

/** The wizard of `ref`, read without a lock (a statement shared with the reads arriving with it); not_found as `findOwnOnboarding`. */
export async function readWizard(orm: MikroORM, ref: Key): Promise<CompletionWizard> {
  const { key, notFound } = ownOnboardingKey(ref);
  const row = await statementsFor(orm).reads.submit(key);
  if (!row) throw notFound();
  return wizardOfRow(row);
}

/**
 * One statement (shared with the takes arriving with it), committed on its own: the wizard of
 * `ref`, with its completion lease for this run when the wizard is not completed, its invitation
 * not revoked, and no other run holds an unexpired lease (an atomic UPDATE decides between
 * concurrent runs; the invitation is read under a share lock, as it is at that moment, so a
 * revocation either commits first and is seen, or waits and then finds the lease), and
 * `completionStartedAt` set unless an earlier run set it, so a re-run after an interruption
 * knows since when what it finds in billing is its own. not_found as `findOwnOnboarding`.
 */
export async function takeWizard(orm: MikroORM, ref: Key, leaseSeconds: number): Promise<TakenWizard> {
  const { key, notFound } = ownOnboardingKey(ref);
  const row = await statementsFor(orm).takes.submit({ ...key, leaseSeconds });
  if (!row) throw notFound();
  return { ...wizardOfRow(row), leased: row.leased, leaseUntil: row.onboarding.completion_lease_until };
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
 * Records a completion, as one statement (shared with the records arriving with it): the
 * wizard's ids and `completedAt` (its lease cleared), the invitation completed (what
 * `Invitation.complete` changes), and `onboarding.completed` in the outbox. All of it only with
 * the wizard's first completion (`completed_at` still null), so the event is never written
 * twice; false when an earlier completion had been recorded (a run whose lease expired while it
 * called billing).
 */
export function recordCompletion(orm: MikroORM, completion: Completion): Promise<boolean> {
  return statementsFor(orm).records.submit(completion);
}
