import type { MikroORM } from '@mikro-orm/postgresql';
import { AckPolicy, DeliverPolicy, jetstream, jetstreamManager, JetStreamApiCodes, JetStreamApiError, type ConsumerMessages, type JetStreamManager, type JsMsg } from '@nats-io/jetstream';
import { connect, nanos, type NatsConnection } from '@nats-io/transport-node';
import { DomainError, EVENT_SUBJECT_PREFIX, EVENTS_STREAM, EventEnvelope, isApiKeyEventType } from '@billing/contracts';
import { ensureEventsStream, natsServerOptions, type Logger } from '@billing/service-runtime';
import { context, SpanStatusCode, startProcessSpan, trace, traceHeadersOf, type Span } from '@billing/telemetry';
import type { Dispatcher } from '../deliveries/dispatcher.js';
import type { EndpointChange } from '../endpoints/endpoint-changes.js';
import type { EndpointStateSource } from '../endpoints/sync-endpoint.js';
import { ingestEvents } from './ingest.js';

/** The webhooks service's durable consumer of the EVENTS stream, shared by its replicas. */
export const WEBHOOKS_CONSUMER = 'webhooks';
const MAX_BATCH = 500;
/** Messages buffered here before the consumer stops pulling. */
const MAX_BUFFERED = 2000;

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

export interface EventConsumerOptions {
  natsUrl: string;
  leaseMs: number;
  /** Unacknowledged messages are redelivered after this long. */
  ackWaitMs: number;
  /** Identity's committed endpoint state of a key, applied for its `api_key.*` events (see `withCommittedEndpointStates`). */
  endpointStates: EndpointStateSource;
}

/**
 * Reads every event from JetStream with a durable pull consumer (explicit acks, unlimited
 * redelivery) and ingests them in batches: whatever arrived while the previous batch was being
 * written becomes the next batch, so the database sees one transaction per batch. Messages are
 * acked only after their batch committed; a failure naks them for redelivery. NATS restarts are
 * survived by the client's reconnects; a lost stream or consumer is created again.
 */
export class EventConsumer {
  private stopped = false;
  private nc: NatsConnection | undefined;
  private messages: ConsumerMessages | undefined;
  private buffer: JsMsg[] = [];
  private wakeProcessor: (() => void) | undefined;
  private wakePuller: (() => void) | undefined;
  private loops: Promise<void>[] = [];
  private lastWarnAt = 0;
  /** Events ingested (first time seen) since start. */
  ingested = 0;

  constructor(
    private readonly orm: MikroORM,
    private readonly dispatcher: Dispatcher,
    private readonly opts: EventConsumerOptions,
    private readonly logger: Logger,
  ) {}

  start(): this {
    this.loops = [this.pullLoop(), this.processLoop()];
    return this;
  }

  async stop(): Promise<void> {
    this.stopped = true;
    this.wakeProcessor?.();
    this.wakePuller?.();
    await this.messages?.close().catch(() => undefined);
    await Promise.race([Promise.all(this.loops), sleep(5000)]);
    await this.nc?.close().catch(() => undefined);
  }

  /** Messages of the durable consumer not yet delivered, and delivered but not yet acked (undefined when NATS is unreachable). */
  async pending(): Promise<{ pending: number; ackPending: number } | undefined> {
    if (!this.nc || this.nc.isClosed()) return undefined;
    const info = await (await jetstreamManager(this.nc)).consumers.info(EVENTS_STREAM, WEBHOOKS_CONSUMER);
    return { pending: info.num_pending, ackPending: info.num_ack_pending };
  }

  private async pullLoop(): Promise<void> {
    while (!this.stopped) {
      try {
        if (!this.nc || this.nc.isClosed()) {
          this.nc = await connect({
            ...natsServerOptions(this.opts.natsUrl),
            name: 'webhooks-consumer',
            // No stack capture per request (every ack and pull is one).
            noAsyncTraces: true,
            maxReconnectAttempts: -1,
            reconnectTimeWait: 250,
          });
          this.logger.info('webhooks consumer connected to NATS');
        }
        const jsm = await jetstreamManager(this.nc);
        await ensureEventsStream(jsm);
        await ensureConsumer(jsm, this.opts.ackWaitMs);
        const consumer = await jetstream(this.nc).consumers.get(EVENTS_STREAM, WEBHOOKS_CONSUMER);
        const messages = await consumer.consume({ max_messages: 1000 });
        this.messages = messages;
        void (async () => {
          for await (const s of messages.status()) {
            // The server lost the stream or consumer (e.g. restarted without its store): start over.
            if (s.type === 'consumer_not_found' || s.type === 'stream_not_found' || s.type === 'consumer_deleted') {
              this.warn(s, 'webhooks consumer lost; recreating');
              await messages.close().catch(() => undefined);
            }
          }
        })().catch(() => undefined);
        for await (const m of messages) {
          this.buffer.push(m);
          this.wakeProcessor?.();
          while (this.buffer.length >= MAX_BUFFERED && !this.stopped) await new Promise<void>((r) => (this.wakePuller = r));
          if (this.stopped) break;
        }
      } catch (e) {
        this.warn(e, 'webhooks consumer failed; retrying');
      }
      if (!this.stopped) await sleep(500);
    }
  }

  private async processLoop(): Promise<void> {
    while (!this.stopped || this.buffer.length) {
      if (this.buffer.length === 0) {
        if (this.stopped) break;
        await new Promise<void>((r) => {
          this.wakeProcessor = r;
          setTimeout(r, 1000);
        });
        this.wakeProcessor = undefined;
        continue;
      }
      const batch = this.buffer.splice(0, MAX_BATCH);
      if (this.buffer.length < MAX_BUFFERED) this.wakePuller?.();
      await this.process(batch);
    }
  }

  private async process(batch: JsMsg[]): Promise<void> {
    let valid: { msg: JsMsg; event: EventEnvelope }[] = [];
    for (const msg of batch) {
      const parsed = (() => {
        try {
          return EventEnvelope.safeParse(msg.json());
        } catch {
          return undefined;
        }
      })();
      if (parsed?.success) valid.push({ msg, event: parsed.data });
      else {
        this.logger.error({ subject: msg.subject, seq: msg.seq }, 'malformed event on the bus; dropped');
        msg.term();
      }
    }
    const held = await this.withCommittedEndpointStates(valid);
    if (held.length) {
      this.warn(held[0]!.error, 'identity did not answer the endpoint state of api_key events; they will be redelivered');
      for (const h of held) h.msg.nak(1000);
      const heldMsgs = new Set(held.map((h) => h.msg));
      valid = valid.filter((v) => !heldMsgs.has(v.msg));
    }
    if (!valid.length) return;
    // Each message is processed in a consumer span continuing its publisher's trace. The batch is
    // one transaction: its queries are traced when it holds a single message (under load they
    // belong to no single trace).
    const spans = valid.map((v) => startProcessSpan(v.msg.subject, v.event.id, { traceparent: v.msg.headers?.get('traceparent'), tracestate: v.msg.headers?.get('tracestate') }, WEBHOOKS_CONSUMER));
    const traceOf = new Map(valid.map((v, i) => [v.event.id, spans[i]!]));
    const planned = new Map<string, number>();
    try {
      const ingest = () =>
        ingestEvents(
          this.orm,
          valid.map((v) => v.event),
          {
            leaseMs: this.opts.leaseMs,
            startNow: (apiKeyId) => {
              const n = planned.get(apiKeyId) ?? 0;
              if (!this.dispatcher.hasRoomFor(apiKeyId, n)) return false;
              planned.set(apiKeyId, n + 1);
              return true;
            },
          },
        );
      const result = spans.length === 1 ? await context.with(trace.setSpan(context.active(), spans[0]!), ingest) : await ingest();
      for (const v of valid) v.msg.ack();
      this.ingested += result.fresh;
      endAll(spans);
      for (const job of result.jobs) {
        const span = traceOf.get(job.eventId);
        this.dispatcher.submit(span ? { ...job, traceContext: traceHeadersOf(span) } : job);
      }
    } catch (e) {
      endAll(spans, e);
      this.warn(e, 'ingesting events failed; they will be redelivered');
      for (const v of valid) v.msg.nak(1000);
      await sleep(500);
    }
  }

  /**
   * Replaces each `api_key.*` event's state (`data`, and `occurredAt` with the state's time of
   * change) by the one identity has committed for its key, read as `syncEndpoint` reads it. The
   * copy keeps the state with the highest version, so a state taken from the event as sent would
   * let anything that can publish on NATS redirect a key's webhooks for good (another URL,
   * version + 1000); now the most a published event can do is bring a key up to date. An event
   * naming a key identity does not have changes nothing (its `data` becomes `{}`, which ingest
   * ignores). Events whose state identity did not answer are returned, to be redelivered; the
   * rest of the batch goes on (an event overtaking an endpoint change is caught up when it comes).
   */
  private async withCommittedEndpointStates(valid: { msg: JsMsg; event: EventEnvelope }[]): Promise<{ msg: JsMsg; error: unknown }[]> {
    const held: { msg: JsMsg; error: unknown }[] = [];
    // One read per key, however many of its events the batch holds (a burst of changes of one key).
    const reads = new Map<string, Promise<EndpointChange | undefined>>();
    const readOnce = (apiKeyId: string) => {
      let read = reads.get(apiKeyId);
      if (!read) {
        read = this.opts.endpointStates.read({ kind: 'platform' }, apiKeyId).catch((e: unknown) => {
          if (e instanceof DomainError && e.code === 'not_found') return undefined;
          throw e;
        });
        reads.set(apiKeyId, read);
      }
      return read;
    };
    await Promise.all(
      valid.map(async (v) => {
        if (!isApiKeyEventType(v.event.type)) return;
        const apiKeyId = (v.event.data as { apiKeyId?: unknown } | null)?.apiKeyId;
        try {
          const committed = typeof apiKeyId === 'string' ? await readOnce(apiKeyId) : undefined;
          v.event = committed ? { ...v.event, data: committed.state, occurredAt: committed.occurredAt } : { ...v.event, data: {} };
        } catch (e) {
          held.push({ msg: v.msg, error: e });
        }
      }),
    );
    return held;
  }

  private warn(err: unknown, msg: string): void {
    if (this.stopped) return;
    const now = Date.now();
    if (now - this.lastWarnAt < 10_000) return;
    this.lastWarnAt = now;
    this.logger.warn({ err }, msg);
  }
}

function endAll(spans: Span[], error?: unknown): void {
  for (const span of spans) {
    if (error) {
      span.recordException(error as Error);
      span.setStatus({ code: SpanStatusCode.ERROR });
    }
    span.end();
  }
}

/** Creates the durable consumer, or updates its settings; idempotent across replicas. */
async function ensureConsumer(jsm: JetStreamManager, ackWaitMs: number): Promise<void> {
  const settings = { ack_wait: nanos(ackWaitMs), max_deliver: -1, max_ack_pending: 20_000 };
  try {
    const info = await jsm.consumers.info(EVENTS_STREAM, WEBHOOKS_CONSUMER);
    if (info.config.ack_wait !== settings.ack_wait || info.config.max_ack_pending !== settings.max_ack_pending) {
      await jsm.consumers.update(EVENTS_STREAM, WEBHOOKS_CONSUMER, settings);
    }
  } catch (e) {
    if (!(e instanceof JetStreamApiError && e.code === JetStreamApiCodes.ConsumerNotFound)) throw e;
    await jsm.consumers.add(EVENTS_STREAM, {
      durable_name: WEBHOOKS_CONSUMER,
      ack_policy: AckPolicy.Explicit,
      deliver_policy: DeliverPolicy.All,
      filter_subject: `${EVENT_SUBJECT_PREFIX}>`,
      ...settings,
    });
  }
}
