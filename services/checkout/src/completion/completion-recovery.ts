import type { MikroORM } from '@mikro-orm/postgresql';
import { DomainError } from '@billing/contracts';
import { queryRows, type Logger } from '@billing/service-runtime';
import { completeOnboarding } from '../onboarding/complete-onboarding.js';
import type { WizardDeps } from '../onboarding/wizard.js';
import type { SessionCompletion } from './complete-session.js';

/** Completions finished per kind and round at most. */
const BATCH = 50;

/**
 * Finishes completions whose attempt died half way. A completion attempt holds its checkout
 * session or onboarding wizard by a lease (`CHECKOUT_COMPLETION_LEASE_SECONDS`); an attempt that
 * ends without completing (a refusal, an unreachable service) gives it back at once, so a lease
 * that ran out means the process stopped between taking it and recording the outcome. By then
 * the member, payment method and subscription may exist in billing (the subscription is charged
 * by the next billing run) while the session is still Open, or the invitation Accepted, and
 * `checkout.completed` or `onboarding.completed` unsent: until now only the customer pressing
 * Subscribe (or Complete) again finished it. Each round re-runs those completions as their
 * customer's retry would (the steps converge on what the dead attempt made); several replicas
 * may run it at once, since an attempt takes the lease atomically and only one wins.
 */
export class CompletionRecovery {
  private timer?: NodeJS.Timeout;
  private running?: Promise<unknown>;

  constructor(
    private readonly orm: MikroORM,
    private readonly sessions: SessionCompletion,
    private readonly wizards: WizardDeps,
    private readonly logger: Logger,
  ) {}

  start(intervalMs: number): this {
    if (intervalMs > 0) {
      this.timer = setInterval(() => {
        this.running ??= this.round()
          .catch((err) => this.logger.warn({ err }, 'recovering interrupted completions failed; retrying next round'))
          .finally(() => {
            this.running = undefined;
          });
      }, intervalMs);
      this.timer.unref();
    }
    return this;
  }

  async stop(): Promise<void> {
    clearInterval(this.timer);
    await this.running;
  }

  /** One round: the interrupted completions found now, finished one after another. Answers how many of each were tried. */
  async round(): Promise<{ sessions: number; onboardings: number }> {
    const em = this.orm.em.fork();
    const sessions = await queryRows<{ id: string; merchant_id: string; completion_token: string }>(
      em,
      `select id, merchant_id, completion_token from sessions
        where status = 'Open' and completion_lease_until < now() and completion_token is not null
        order by completion_lease_until limit ?`,
      [BATCH],
    );
    for (const s of sessions) {
      try {
        const result = await this.sessions.complete(s.merchant_id, s.id, s.completion_token);
        this.logger.info({ sessionId: s.id, status: result.status, failureKind: result.failureKind || undefined }, 'finished an interrupted checkout completion');
        // Refused (e.g. the customer has a live subscription to the plan since): the customer's answer to give, not ours to retry.
        if (result.status === 'Failed') await this.giveUp('sessions', 'id', s.id);
      } catch (err) {
        this.logger.warn({ err, sessionId: s.id }, 'could not finish an interrupted checkout completion; trying again next round');
      }
    }
    const wizards = await queryRows<{ invitation_id: string; account_id: string }>(
      em,
      `select invitation_id, account_id from onboardings
        where completed_at is null and completion_lease_until < now()
        order by completion_lease_until limit ?`,
      [BATCH],
    );
    for (const w of wizards) {
      try {
        await completeOnboarding(this.wizards, { accountId: w.account_id, invitationId: w.invitation_id });
        this.logger.info({ invitationId: w.invitation_id }, 'finished an interrupted onboarding completion');
      } catch (err) {
        if (isRefusal(err)) {
          // The wizard no longer completes as it is (a plan no longer offered, a revoked invitation): the customer's to fix.
          this.logger.info({ invitationId: w.invitation_id, code: (err as DomainError).code }, 'an interrupted onboarding completion is refused now; left to its customer');
          await this.giveUp('onboardings', 'invitation_id', w.invitation_id);
        } else {
          this.logger.warn({ err, invitationId: w.invitation_id }, 'could not finish an interrupted onboarding completion; trying again next round');
        }
      }
    }
    return { sessions: sessions.length, onboardings: wizards.length };
  }

  /** Stops recovering one completion: its run-out lease is cleared (only if still run out: a new attempt's is kept). */
  private async giveUp(table: 'sessions' | 'onboardings', key: 'id' | 'invitation_id', id: string): Promise<void> {
    await queryRows(this.orm.em.fork(), `update ${table} set completion_lease_until = null where ${key} = ? and completion_lease_until < now()`, [id]);
  }
}

/** A refusal the customer must act on, as opposed to a failure that may pass (a service down, a conflict with a running attempt). */
function isRefusal(err: unknown): boolean {
  return err instanceof DomainError && ['validation_failed', 'bad_request', 'not_found', 'gone', 'unprocessable', 'forbidden'].includes(err.code);
}
