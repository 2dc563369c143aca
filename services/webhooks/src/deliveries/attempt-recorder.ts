import type { MikroORM } from '@mikro-orm/postgresql';
import { queryRows, type Logger } from '@billing/service-runtime';
import { transitionAfter, type AttemptOutcome, type DeliveryTransition } from './delivery.js';
import type { DeliveryJob } from './delivery-job.js';
import type { RetryPolicy } from './retry-policy.js';

export interface AttemptRecord {
  job: DeliveryJob;
  attemptId: string;
  attemptedAt: Date;
  outcome: AttemptOutcome;
}

const MAX_BATCH = 1000;
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

/**
 * Writes attempts and the delivery changes they cause, many per transaction: whatever finished
 * while the previous write ran goes into the next one, so the database sees a few statements
 * per batch instead of per attempt. If the process dies before a write, the delivery's lease
 * runs out and it is attempted again (at least once; receivers de-duplicate on `webhook-id`).
 */
export class AttemptRecorder {
  private pending: AttemptRecord[] = [];
  private postponed: { job: DeliveryJob; delayMs: number }[] = [];
  private released: DeliveryJob[] = [];
  private flushing: Promise<void> | undefined;
  /** Attempts written since start. */
  written = 0;

  constructor(
    private readonly orm: MikroORM,
    private readonly policy: RetryPolicy,
    private readonly logger: Logger,
  ) {}

  record(r: AttemptRecord): void {
    this.pending.push(r);
    this.kick();
  }

  /** The job could not be attempted (e.g. the signing secret was unavailable): try again after `delayMs`, without an attempt. */
  postpone(job: DeliveryJob, delayMs: number): void {
    this.postponed.push({ job, delayMs });
    this.kick();
  }

  /** Jobs taken but never started (shutdown): give them back at once instead of at lease expiry. */
  release(jobs: DeliveryJob[]): void {
    this.released.push(...jobs);
    this.kick();
  }

  /** Resolves when everything recorded so far is written (or `timeoutMs` passed). */
  async drain(timeoutMs = 5000): Promise<void> {
    const end = Date.now() + timeoutMs;
    while ((this.flushing || this.pending.length || this.postponed.length || this.released.length) && Date.now() < end) {
      this.kick();
      await Promise.race([this.flushing, sleep(50)]);
    }
  }

  private kick(): void {
    this.flushing ??= this.flushLoop().finally(() => {
      this.flushing = undefined;
      // Something recorded between the loop's last check and here.
      if (this.pending.length || this.postponed.length || this.released.length) this.kick();
    });
  }

  private async flushLoop(): Promise<void> {
    let failures = 0;
    await new Promise((r) => setImmediate(r));
    while (this.pending.length || this.postponed.length || this.released.length) {
      const batch = this.pending.splice(0, MAX_BATCH);
      const postponed = this.postponed.splice(0, MAX_BATCH);
      const released = this.released.splice(0, MAX_BATCH);
      try {
        await this.write(batch, postponed, released);
        this.written += batch.length;
        failures = 0;
      } catch (e) {
        failures++;
        if (failures === 1 || failures % 20 === 0) this.logger.warn({ err: e, failures }, 'writing webhook attempts failed; retrying');
        this.pending.unshift(...batch);
        this.postponed.unshift(...postponed);
        this.released.unshift(...released);
        await sleep(Math.min(100 * 2 ** Math.min(failures, 6), 5000));
      }
    }
  }

  private async write(batch: AttemptRecord[], postponed: { job: DeliveryJob; delayMs: number }[], released: DeliveryJob[]): Promise<void> {
    const attempts = batch.map((r) => ({
      id: r.attemptId,
      delivery_id: r.job.deliveryId,
      attempted_at: r.attemptedAt.toISOString(),
      trigger: r.job.trigger,
      status_code: r.outcome.statusCode,
      duration_ms: r.outcome.durationMs,
      error: r.outcome.error,
      response_body: r.outcome.responseBody,
    }));
    const changes = deliveryChanges(batch, this.policy);
    const replayIds = batch.filter((r) => r.job.replayId).map((r) => r.job.replayId!);
    const later = (ms: number) => new Date(Date.now() + ms).toISOString();
    const postponedDeliveries = postponed.filter((p) => !p.job.replayId).map((p) => ({ id: p.job.deliveryId, until: later(p.delayMs) }));
    const postponedReplays = postponed.filter((p) => p.job.replayId).map((p) => ({ id: p.job.replayId, until: later(p.delayMs) }));
    const releasedDeliveries = released.filter((j) => !j.replayId).map((j) => ({ id: j.deliveryId, until: null }));
    const releasedReplays = released.filter((j) => j.replayId).map((j) => ({ id: j.replayId, until: null }));

    await this.orm.em.fork().transactional(async (em) => {
      // A database crash losing this commit only means attempting those deliveries again (at
      // least once), so it need not wait for the WAL flush.
      await queryRows(em, 'set local synchronous_commit = off');
      if (attempts.length) {
        await queryRows(
          em,
          `insert into "attempts" ("id", "delivery_id", "attempted_at", "trigger", "status_code", "duration_ms", "error", "response_body")
           select * from jsonb_to_recordset(?::jsonb) as r("id" uuid, "delivery_id" uuid, "attempted_at" timestamptz, "trigger" text, "status_code" int, "duration_ms" int, "error" text, "response_body" text)
           on conflict ("id") do nothing`,
          [JSON.stringify(attempts)],
        );
      }
      if (changes.length) {
        // A scheduled result never overrides a delivery that a manual replay already succeeded.
        await queryRows(
          em,
          `update "deliveries" d set
             "status" = coalesce(u."status", d."status"),
             "scheduled_attempts" = coalesce(u."scheduled_attempts", d."scheduled_attempts"),
             "next_attempt_at" = case when u."set_next" then u."next_attempt_at" else d."next_attempt_at" end,
             "lease_until" = case when u."release_lease" then null else d."lease_until" end,
             "updated_at" = now()
           from jsonb_to_recordset(?::jsonb) as u("id" uuid, "status" text, "scheduled_attempts" int, "set_next" boolean, "next_attempt_at" timestamptz, "release_lease" boolean)
           where d."id" = u."id" and (d."status" = 'Pending' or u."status" = 'Succeeded')`,
          [JSON.stringify(changes)],
        );
      }
      if (replayIds.length) await queryRows(em, `delete from "replays" where "id" = any(?::uuid[])`, [`{${replayIds.join(',')}}`]);
      const leases = [...postponedDeliveries, ...releasedDeliveries];
      if (leases.length) {
        await queryRows(
          em,
          `update "deliveries" d set "lease_until" = u."until" from jsonb_to_recordset(?::jsonb) as u("id" uuid, "until" timestamptz) where d."id" = u."id" and d."status" = 'Pending'`,
          [JSON.stringify(leases)],
        );
      }
      const replayLeases = [...postponedReplays, ...releasedReplays];
      if (replayLeases.length) {
        await queryRows(em, `update "replays" r set "lease_until" = u."until" from jsonb_to_recordset(?::jsonb) as u("id" uuid, "until" timestamptz) where r."id" = u."id"`, [JSON.stringify(replayLeases)]);
      }
    });
  }
}

/** One row per delivery: the combined effect of its attempts in this batch. */
function deliveryChanges(batch: AttemptRecord[], policy: RetryPolicy) {
  const byDelivery = new Map<string, { t: DeliveryTransition; scheduled: boolean }>();
  for (const r of batch) {
    const t = transitionAfter(r.job.trigger, r.job.scheduledAttempts, r.outcome, policy, new Date());
    const scheduled = r.job.trigger === 'Scheduled';
    const seen = byDelivery.get(r.job.deliveryId);
    if (!seen) {
      byDelivery.set(r.job.deliveryId, { t, scheduled });
      continue;
    }
    const merged: DeliveryTransition = { ...seen.t, ...t };
    if (seen.t.status === 'Succeeded' || t.status === 'Succeeded') Object.assign(merged, { status: 'Succeeded', nextAttemptAt: null });
    byDelivery.set(r.job.deliveryId, { t: merged, scheduled: seen.scheduled || scheduled });
  }
  return [...byDelivery.entries()]
    .filter(([, { t, scheduled }]) => scheduled || t.status !== undefined)
    .map(([id, { t, scheduled }]) => ({
      id,
      status: t.status ?? null,
      scheduled_attempts: t.scheduledAttempts ?? null,
      set_next: t.nextAttemptAt !== undefined,
      next_attempt_at: t.nextAttemptAt?.toISOString() ?? null,
      release_lease: scheduled,
    }));
}
