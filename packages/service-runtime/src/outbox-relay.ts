import { existsSync, unlinkSync } from 'node:fs';
import type { MikroORM } from '@mikro-orm/postgresql';
import { jetstreamManager } from '@nats-io/jetstream';
import { connect, type NatsConnection } from '@nats-io/transport-node';
import { z } from 'zod';
import { eventSubject, eventVersion, type EventEnvelope } from '@billing/contracts';
import { observeGauge, publishMessage } from '@billing/telemetry';
import { AckedPublisher } from './acked-publisher.js';
import { queryRows, transactPrepared } from './database.js';
import { ensureEventsStream } from './event-stream.js';
import type { Logger } from './logger.js';
import { natsServerOptions } from './nats.js';
import { outboxChannel } from './outbox.js';

/** Relay settings read from the environment (all optional). */
export const OutboxRelayEnv = z.object({
  /** Upper bound on the wait between two looks at the outbox when no commit notification arrives. */
  OUTBOX_POLL_MS: z.coerce.number().int().min(10).default(1000),
  /** After a round that found rows, how long to let more commits gather before the next one. */
  OUTBOX_COALESCE_MS: z.coerce.number().int().min(0).max(1000).default(10),
  /** Rows claimed and published per round. */
  OUTBOX_BATCH_SIZE: z.coerce.number().int().min(1).max(5000).default(500),
  /** How long published rows are kept before they are pruned. */
  OUTBOX_RETENTION_HOURS: z.coerce.number().min(0).default(168),
  /**
   * Test hook (refused in production mode): when this file exists as the relay is about to
   * publish, the relay deletes it and kills its own process with SIGKILL, simulating a crash
   * between the service's commit and the publish.
   */
  OUTBOX_RELAY_CRASH_FILE: z.string().optional(),
  PLATFORM_MODE: z.string().optional(),
});

export interface OutboxRelayOptions {
  orm: MikroORM;
  /** The service's schema, which holds its `outbox` table. */
  schema: string;
  natsUrl: string;
  logger: Logger;
  /** Connection name shown by NATS monitoring, e.g. `identity-outbox`. */
  name: string;
  batchSize?: number;
  pollIntervalMs?: number;
  /** See OUTBOX_COALESCE_MS; default 10. */
  coalesceMs?: number;
  /** How long to wait for each publish acknowledgement. */
  publishTimeoutMs?: number;
  retentionMs?: number;
  pruneIntervalMs?: number;
  crashBeforePublishFile?: string;
}

interface OutboxRow {
  id: string;
  type: string;
  merchant_id: string;
  data: Record<string, unknown>;
  occurred_at: Date | string;
  trace_context: Record<string, string> | null;
}

/** The subset of a node-postgres client the LISTEN connection uses. */
interface ListenClient {
  query(sql: string): Promise<unknown>;
  on(event: 'notification' | 'error' | 'end', fn: (arg?: unknown) => void): void;
  end(): Promise<void>;
}

/** A wake-up flag: `notify` ends the current (or next) `wait` early. */
class Wake {
  private pending = false;
  private resolve: (() => void) | undefined;

  notify(): void {
    this.pending = true;
    this.resolve?.();
  }

  wait(ms: number): Promise<void> {
    if (this.pending) {
      this.pending = false;
      return Promise.resolve();
    }
    return new Promise((done) => {
      const timer = setTimeout(finish, ms);
      const self = this;
      function finish() {
        clearTimeout(timer);
        self.resolve = undefined;
        self.pending = false;
        done();
      }
      this.resolve = finish;
    });
  }
}

/** A Postgres array literal of uuids (a JS array would be expanded into a list of parameters). */
const pgArray = (ids: string[]) => `{${ids.join(',')}}`;

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

/**
 * Publishes a service's outbox to JetStream: the transactional outbox relay.
 *
 * Each round claims the oldest unpublished rows with `FOR UPDATE SKIP LOCKED` (so replicas of
 * the service split the work instead of publishing the same rows), publishes them pipelined on
 * one connection (the stream receives them in claim order) with `Nats-Msg-Id` = outbox id and
 * the trace context of a `publish` span continuing the row's trace as headers, their
 * acknowledgements gathered on one reply subscription (`AckedPublisher`), and marks a row
 * published only after its publish was acknowledged, in the same transaction that holds the
 * claim. A crash anywhere leaves the row unpublished, so it is published again later: JetStream
 * drops the repeat within the stream's duplicate window and consumers de-duplicate on the event
 * id beyond it.
 *
 * The relay wakes on a Postgres NOTIFY sent at commit by the outbox trigger (see
 * `outboxNotifySql`), on `nudge()`, and otherwise every `pollIntervalMs`. NATS or Postgres being
 * unavailable never stops the service: the relay retries with back-off until they return.
 */
export class OutboxRelay {
  private readonly wake = new Wake();
  private readonly batchSize: number;
  private readonly pollIntervalMs: number;
  private readonly coalesceMs: number;
  private readonly publishTimeoutMs: number;
  private readonly retentionMs: number;
  private readonly pruneIntervalMs: number;
  private stopped = false;
  private nc: NatsConnection | undefined;
  private publisher: AckedPublisher | undefined;
  private streamReady = false;
  private listener: ListenClient | undefined;
  private pruneTimer: NodeJS.Timeout | undefined;
  private loops: Promise<void>[] = [];
  private lastWarnAt = 0;
  /** Events published by this process since start. */
  published = 0;

  constructor(private readonly opts: OutboxRelayOptions) {
    this.batchSize = opts.batchSize ?? 500;
    this.pollIntervalMs = opts.pollIntervalMs ?? 1000;
    this.coalesceMs = opts.coalesceMs ?? 10;
    this.publishTimeoutMs = opts.publishTimeoutMs ?? 5000;
    this.retentionMs = opts.retentionMs ?? 7 * 24 * 3600_000;
    this.pruneIntervalMs = opts.pruneIntervalMs ?? 3600_000;
  }

  /** Starts relaying in the background; never throws for an unavailable NATS or database. */
  start(): this {
    this.loops = [this.relayLoop(), this.listenLoop()];
    this.pruneTimer = setInterval(() => void this.prune().catch((e) => this.warn(e, 'outbox prune failed')), this.pruneIntervalMs);
    this.pruneTimer.unref();
    return this;
  }

  /** Asks for a round now (e.g. right after a commit that recorded an event). */
  nudge(): void {
    this.wake.notify();
  }

  async stop(): Promise<void> {
    this.stopped = true;
    this.wake.notify();
    clearInterval(this.pruneTimer);
    await this.listener?.end().catch(() => undefined);
    await Promise.race([Promise.all(this.loops), sleep(this.publishTimeoutMs + 1000)]);
    this.publisher?.close();
    await this.nc?.close().catch(() => undefined);
  }

  /** Deletes rows published longer ago than the retention period, in bounded chunks. */
  async prune(): Promise<number> {
    let total = 0;
    for (;;) {
      const res = await this.opts.orm.em.fork().getConnection().execute<{ affectedRows?: number; rowCount?: number }>(
        `delete from "${this.opts.schema}"."outbox" where "id" in (
           select "id" from "${this.opts.schema}"."outbox"
            where "published_at" < now() - (? * interval '1 millisecond') limit 10000)`,
        [this.retentionMs],
        'run',
      );
      const n = Number(res.affectedRows ?? res.rowCount ?? 0);
      total += n;
      if (n < 10000) return total;
    }
  }

  private async relayLoop(): Promise<void> {
    let failures = 0;
    while (!this.stopped) {
      try {
        const publisher = await this.connected();
        const { claimed, failed } = await this.relayBatch(publisher);
        if (failed) throw failed;
        failures = 0;
        if (claimed < this.batchSize) {
          await this.wake.wait(this.pollIntervalMs);
          // Under load every commit NOTIFYs, and a round per notification costs a transaction
          // (several round trips) for a handful of rows. While events keep coming (the last round
          // found some), a short pause lets the next round take all that committed meanwhile.
          if (claimed > 0 && this.coalesceMs > 0 && !this.stopped) await sleep(this.coalesceMs);
        }
      } catch (e) {
        this.streamReady = false;
        failures++;
        this.warn(e, 'outbox relay round failed; retrying');
        await this.wake.wait(Math.min(250 * 2 ** Math.min(failures - 1, 3), 2000));
      }
    }
  }

  private async connected(): Promise<AckedPublisher> {
    if (!this.nc || this.nc.isClosed()) {
      this.publisher?.close();
      this.publisher = undefined;
      this.nc = await connect({
        ...natsServerOptions(this.opts.natsUrl),
        name: this.opts.name,
        // No stack capture per request: a publish is a request, and there are thousands a second.
        noAsyncTraces: true,
        maxReconnectAttempts: -1,
        reconnectTimeWait: 250,
      });
      this.streamReady = false;
      this.opts.logger.info('outbox relay connected to NATS');
    }
    if (!this.streamReady) {
      await ensureEventsStream(await jetstreamManager(this.nc));
      this.streamReady = true;
    }
    this.publisher ??= new AckedPublisher(this.nc, this.publishTimeoutMs);
    return this.publisher;
  }

  /**
   * One round: claim, publish, mark published; returns how many rows were claimed. A round runs on
   * a connection of the ORM's pool outside the ORM (`transactPrepared`): a round per few events is
   * what every write pays, and the ORM's transaction (knex's transactor, built per transaction)
   * cost the billing service more CPU than the round's statements. They are unnamed (planned each
   * round): the outbox keeps its published rows for the retention period, so it grows from empty
   * to the size a plan made early would scan.
   */
  private async relayBatch(publisher: AckedPublisher): Promise<{ claimed: number; failed?: unknown }> {
    const { schema } = this.opts;
    return transactPrepared(this.opts.orm, async (query) => {
      const { rows } = await query<OutboxRow>(
        undefined,
        `select "id", "type", "merchant_id", "data", "occurred_at", "trace_context" from "${schema}"."outbox"
          where "published_at" is null order by "seq" limit $1 for update skip locked`,
        [this.batchSize],
      );
      if (rows.length === 0) return { claimed: 0 };
      // Losing this transaction's commit in a database crash only means publishing the rows
      // again (dropped as duplicates), so it need not wait for the WAL flush.
      await query(undefined, 'set local synchronous_commit = off', []);
      this.crashIfAsked();
      const results = await Promise.allSettled(rows.map((row) => this.publish(publisher, row)));
      const acked = rows.filter((_, i) => results[i]!.status === 'fulfilled').map((r) => r.id);
      if (acked.length) {
        await query(undefined, `update "${schema}"."outbox" set "published_at" = now() where "id" = any($1::uuid[])`, [pgArray(acked)]);
        this.published += acked.length;
      }
      const failure = results.find((r): r is PromiseRejectedResult => r.status === 'rejected');
      return { claimed: rows.length, failed: failure?.reason };
    });
  }

  /** Publishes one row in a producer span continuing the trace of the transaction that wrote it. */
  private publish(publisher: AckedPublisher, row: OutboxRow) {
    const envelope: EventEnvelope = {
      id: row.id,
      type: row.type,
      version: eventVersion(row.type),
      occurredAt: new Date(row.occurred_at).toISOString(),
      merchantId: row.merchant_id,
      data: row.data,
    };
    const subject = eventSubject(row.type);
    return publishMessage(subject, row.id, row.trace_context, (traceHeaders) => publisher.publish(subject, JSON.stringify(envelope), row.id, traceHeaders));
  }

  private crashIfAsked(): void {
    const file = this.opts.crashBeforePublishFile;
    if (!file || !existsSync(file)) return;
    unlinkSync(file);
    this.opts.logger.warn('OUTBOX_RELAY_CRASH_FILE present: killing the process before publishing');
    process.kill(process.pid, 'SIGKILL');
  }

  /** Holds a dedicated connection LISTENing on the outbox channel, reconnecting when it drops. */
  private async listenLoop(): Promise<void> {
    const knexClient = this.opts.orm.em.getConnection().getKnex().client as unknown as { acquireRawConnection(): Promise<ListenClient> };
    while (!this.stopped) {
      try {
        const conn = await knexClient.acquireRawConnection();
        this.listener = conn;
        const closed = new Promise<unknown>((done) => {
          conn.on('error', done);
          conn.on('end', done);
        });
        conn.on('notification', () => this.wake.notify());
        await conn.query(`listen "${outboxChannel(this.opts.schema)}"`);
        // Anything committed while nobody listened is picked up now.
        this.wake.notify();
        const reason = await closed;
        if (!this.stopped) this.warn(reason, 'outbox LISTEN connection closed; reconnecting');
        await conn.end().catch(() => undefined);
      } catch (e) {
        if (!this.stopped) this.warn(e, 'outbox LISTEN failed; retrying');
      }
      if (!this.stopped) await sleep(1000);
    }
  }

  /** Warnings while a dependency is down are rate-limited to one every 10 s. */
  private warn(err: unknown, msg: string): void {
    if (this.stopped) return;
    const now = Date.now();
    if (now - this.lastWarnAt < 10_000) return;
    this.lastWarnAt = now;
    this.opts.logger.warn({ err }, msg);
  }
}

/**
 * Starts the outbox relay of a service with settings from the environment (`OUTBOX_*`). Call
 * after migrations; `stop()` it before closing the ORM.
 */
export function startOutboxRelay(opts: { orm: MikroORM; schema: string; natsUrl: string; logger: Logger; name: string }, env: NodeJS.ProcessEnv = process.env): OutboxRelay {
  const settings = OutboxRelayEnv.parse(env);
  if (settings.OUTBOX_RELAY_CRASH_FILE && settings.PLATFORM_MODE === 'production') {
    throw new Error('OUTBOX_RELAY_CRASH_FILE is a test hook and is refused in production mode');
  }
  observeGauge('outbox.lag', 's', 'Age of the oldest unpublished outbox row (0 when every event is published).', async () => {
    // Scrape-time aggregate over the partial index of unpublished rows.
    const [row] = await queryRows<{ lag: string | null }>(
      opts.orm.em.fork(),
      `select extract(epoch from now() - min("occurred_at")) as "lag" from "${opts.schema}"."outbox" where "published_at" is null`,
    );
    return [{ value: Math.max(0, Number(row?.lag ?? 0)), attributes: { schema: opts.schema } }];
  });
  return new OutboxRelay({
    ...opts,
    batchSize: settings.OUTBOX_BATCH_SIZE,
    pollIntervalMs: settings.OUTBOX_POLL_MS,
    coalesceMs: settings.OUTBOX_COALESCE_MS,
    retentionMs: settings.OUTBOX_RETENTION_HOURS * 3600_000,
    crashBeforePublishFile: settings.OUTBOX_RELAY_CRASH_FILE,
  }).start();
}
