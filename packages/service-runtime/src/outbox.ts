import { randomUUID } from 'node:crypto';
import { EntitySchema, type EntityManager } from '@mikro-orm/postgresql';
import { injectTraceHeaders } from '@billing/telemetry';

/**
 * An integration event waiting to be published. Written with `recordEvent` in the same
 * transaction as the change it describes; the outbox relay publishes it to JetStream with
 * `Nats-Msg-Id` = `id` and only then marks it published.
 */
export class OutboxMessage {
  id: string = randomUUID();
  type!: string;
  merchantId!: string;
  data!: Record<string, unknown>;
  occurredAt: Date = new Date();
  /** W3C trace context (`traceparent`, `tracestate`) of the transaction that wrote it. */
  traceContext: Record<string, string> = {};
  publishedAt: Date | null = null;
}

export const OutboxMessageSchema = new EntitySchema<OutboxMessage>({
  class: OutboxMessage,
  tableName: 'outbox',
  properties: {
    id: { type: 'uuid', primary: true },
    type: { type: 'string' },
    merchantId: { type: 'uuid' },
    data: { type: 'json' },
    occurredAt: { type: 'Date', columnType: 'timestamptz' },
    traceContext: { type: 'json' },
    publishedAt: { type: 'Date', columnType: 'timestamptz', nullable: true },
  },
});

/** SQL creating the outbox table in a service's schema; each service's migration runs it. */
export function outboxTableSql(schema: string): string[] {
  return [
    `create table if not exists "${schema}"."outbox" (
      "id" uuid primary key,
      "type" varchar(100) not null,
      "merchant_id" uuid not null,
      "data" jsonb not null,
      "occurred_at" timestamptz not null,
      "trace_context" jsonb not null default '{}',
      "published_at" timestamptz null)`,
    `create index if not exists "outbox_unpublished_index" on "${schema}"."outbox" ("occurred_at") where "published_at" is null`,
  ];
}

/**
 * Records an integration event in the outbox. Call inside the transaction that makes the change
 * (the event is flushed with it, or not at all).
 */
export function recordEvent(em: EntityManager, event: { type: string; merchantId: string; data: Record<string, unknown>; occurredAt?: Date }): OutboxMessage {
  const msg = Object.assign(new OutboxMessage(), {
    type: event.type,
    merchantId: event.merchantId,
    data: event.data,
    occurredAt: event.occurredAt ?? new Date(),
    traceContext: injectTraceHeaders(),
  });
  em.persist(msg);
  return msg;
}

/** The LISTEN/NOTIFY channel a service's outbox announces commits on. */
export const outboxChannel = (schema: string) => `outbox_${schema}`;

/**
 * SQL adding a statement-level trigger that NOTIFYs the outbox channel on insert. Postgres
 * delivers the notification at commit (and never for a rolled-back transaction), so the relay
 * wakes as soon as an event becomes visible instead of waiting for its next poll.
 */
export function outboxNotifySql(schema: string): string[] {
  return [
    `create or replace function "${schema}"."outbox_notify"() returns trigger language plpgsql as $$
      begin perform pg_notify('${outboxChannel(schema)}', ''); return null; end $$`,
    `create or replace trigger "outbox_notify" after insert on "${schema}"."outbox" for each statement execute function "${schema}"."outbox_notify"()`,
  ];
}
