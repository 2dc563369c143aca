import type { EntityManager, MikroORM } from '@mikro-orm/postgresql';
import { queryRows, type Logger } from '@billing/service-runtime';
import type { DeliveryJob } from './delivery-job.js';
import type { Dispatcher } from './dispatcher.js';

export interface DueSchedulerOptions {
  pollMs: number;
  leaseMs: number;
  /** Most deliveries of one endpoint taken per round. */
  perEndpoint: number;
}

interface ClaimedRow {
  id: string;
  event_id: string;
  event_type: string;
  api_key_id: string;
  merchant_id: string;
  url: string;
  body: string;
  scheduled_attempts: number;
  lease_until: Date | string;
  replay_id?: string;
}

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

/**
 * Takes due work from the database and hands it to the dispatcher: Pending deliveries whose
 * next attempt is due (retries, and new ones the consumer could not start at once) and queued
 * manual replays. Rows are claimed with `FOR UPDATE SKIP LOCKED` and leased for `leaseMs`, so
 * several webhooks replicas share the work without sending anything twice, and a replica that
 * dies leaves its work to the others (or to itself after a restart) when the lease ends. Each
 * round takes at most `perEndpoint` deliveries per endpoint, so one endpoint's backlog cannot
 * crowd out the rest.
 */
export class DueScheduler {
  private stopped = false;
  private loop: Promise<void> | undefined;
  private wakeUp: (() => void) | undefined;
  private pendingWake = false;
  private failures = 0;

  constructor(
    private readonly orm: MikroORM,
    private readonly dispatcher: Dispatcher,
    private readonly opts: DueSchedulerOptions,
    private readonly logger: Logger,
  ) {}

  start(): this {
    this.loop = this.run();
    return this;
  }

  /** Look now (e.g. a replay was just queued). */
  nudge(): void {
    this.pendingWake = true;
    this.wakeUp?.();
  }

  async stop(): Promise<void> {
    this.stopped = true;
    this.nudge();
    await this.loop;
  }

  private async run(): Promise<void> {
    while (!this.stopped) {
      let full = false;
      try {
        full = await this.round();
        this.failures = 0;
      } catch (e) {
        this.failures++;
        if (this.failures === 1 || this.failures % 30 === 0) this.logger.warn({ err: e }, 'claiming due webhook deliveries failed; retrying');
      }
      if (!full) await this.wait(this.opts.pollMs);
      else await sleep(0);
    }
  }

  private wait(ms: number): Promise<void> {
    if (this.pendingWake) {
      this.pendingWake = false;
      return Promise.resolve();
    }
    return new Promise((done) => {
      const finish = () => {
        clearTimeout(timer);
        this.wakeUp = undefined;
        this.pendingWake = false;
        done();
      };
      const timer = setTimeout(finish, ms);
      this.wakeUp = finish;
    });
  }

  /**
   * One claim round; true when more may be due right now (it took all it was allowed overall, or
   * for some endpoint, which is not yet busy). Busy endpoints are looked at again when the
   * dispatcher reports them drained.
   */
  async round(): Promise<boolean> {
    const room = this.dispatcher.room();
    if (room === 0) return false;
    const replays = await this.claimReplays(Math.min(room, 100));
    const deliveries = await this.claimDeliveries(room - replays.length);
    for (const job of [...replays, ...deliveries]) this.dispatcher.submit(job);
    if (replays.length + deliveries.length >= room) return true;
    const perEndpoint = new Map<string, number>();
    for (const j of deliveries) perEndpoint.set(j.apiKeyId, (perEndpoint.get(j.apiKeyId) ?? 0) + 1);
    const busy = new Set(this.dispatcher.busyEndpoints());
    return [...perEndpoint].some(([k, n]) => n >= this.opts.perEndpoint && !busy.has(k));
  }

  /**
   * A lease lost in a database crash only means the work is taken again (at least once), so
   * these commits need not wait for the WAL flush.
   */
  private leaseTransaction<T>(fn: (em: EntityManager) => Promise<T>): Promise<T> {
    return this.orm.em.fork().transactional(async (em) => {
      await queryRows(em, 'set local synchronous_commit = off');
      return fn(em);
    });
  }

  private async claimDeliveries(limit: number): Promise<DeliveryJob[]> {
    if (limit <= 0) return [];
    const busy = this.dispatcher.busyEndpoints();
    // Deliveries of a disabled endpoint wait until it is enabled again; attempts go to the
    // endpoint's current URL, so fixing a URL also fixes the retries.
    const sql = `with due as (
         select d."id", e."url" from "endpoints" e
         cross join lateral (
           select d."id" from "deliveries" d
            where d."api_key_id" = e."api_key_id" and d."status" = 'Pending' and d."next_attempt_at" <= now()
              and (d."lease_until" is null or d."lease_until" < now())
            order by d."next_attempt_at"
            limit ?
            for update skip locked) d
         where e."enabled" and not e."revoked" and e."url" is not null and e."api_key_id" <> all(?::uuid[])
         limit ?)
       update "deliveries" d set "lease_until" = now() + ? * interval '1 millisecond', "url" = due."url"
         from due, "events" ev
        where d."id" = due."id" and ev."id" = d."event_id"
       returning d."id", d."event_id", d."event_type", d."api_key_id", d."merchant_id", d."url", ev."body", d."scheduled_attempts", d."lease_until"`;
    const rows = await this.leaseTransaction((em) => queryRows<ClaimedRow>(em, sql, [this.opts.perEndpoint, `{${busy.join(',')}}`, limit, this.opts.leaseMs]));
    return rows.map((r) => toJob(r, 'Scheduled'));
  }

  private async claimReplays(limit: number): Promise<DeliveryJob[]> {
    if (limit <= 0) return [];
    // A replay queued before its key was revoked, or its webhook URL removed, is dropped, not
    // sent: a replay asked for after either is refused (409), and the revoke failed the key's
    // pending deliveries.
    const sql = `with due as (
         select r."id", (coalesce(e."revoked", false) or (e."api_key_id" is not null and e."url" is null)) as "unsendable" from "replays" r
           join "deliveries" d on d."id" = r."delivery_id"
           left join "endpoints" e on e."api_key_id" = d."api_key_id"
          where r."lease_until" is null or r."lease_until" < now()
          order by r."requested_at"
          limit ?
          for update of r skip locked),
       dropped as (
         delete from "replays" r using due where r."id" = due."id" and due."unsendable"
         returning r."id"),
       claimed as (
         update "replays" r set "lease_until" = now() + ? * interval '1 millisecond'
           from due where r."id" = due."id" and not due."unsendable"
         returning r."id" as "replay_id", r."delivery_id", r."lease_until"),
       -- The delivery shows the URL its latest attempt goes to, as scheduled attempts do.
       moved as (
         update "deliveries" d set "url" = e."url"
           from claimed c, "endpoints" e
          where d."id" = c."delivery_id" and e."api_key_id" = d."api_key_id" and e."url" is not null and d."url" is distinct from e."url"
         returning d."id")
       select c."replay_id", d."id", d."event_id", d."event_type", d."api_key_id", d."merchant_id", coalesce(e."url", d."url") as "url", ev."body", d."scheduled_attempts", c."lease_until"
         from claimed c join "deliveries" d on d."id" = c."delivery_id" left join "endpoints" e on e."api_key_id" = d."api_key_id"
         join "events" ev on ev."id" = d."event_id"`;
    const rows = await this.leaseTransaction((em) => queryRows<ClaimedRow>(em, sql, [limit, this.opts.leaseMs]));
    return rows.map((r) => toJob(r, 'Manual'));
  }
}

function toJob(r: ClaimedRow, trigger: 'Scheduled' | 'Manual'): DeliveryJob {
  return {
    deliveryId: r.id,
    eventId: r.event_id,
    eventType: r.event_type,
    apiKeyId: r.api_key_id,
    merchantId: r.merchant_id,
    url: r.url,
    body: r.body,
    trigger,
    replayId: r.replay_id,
    scheduledAttempts: r.scheduled_attempts,
    leaseUntil: new Date(r.lease_until).getTime(),
  };
}
