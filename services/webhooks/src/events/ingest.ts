import { randomUUID } from 'node:crypto';
import type { MikroORM } from '@mikro-orm/postgresql';
import { ApiKeyEndpointState, isApiKeyEventType, isWebhookEventType, type EventEnvelope, type WebhookPayload } from '@billing/contracts';
import { queryPrepared, queryRows } from '@billing/service-runtime';
import type { DeliveryJob } from '../deliveries/delivery-job.js';
import { Endpoint } from '../endpoints/endpoint.js';
import { applyEndpointStates, catchUpEndpoints } from '../endpoints/endpoint-changes.js';

export interface IngestOptions {
  leaseMs: number;
  /** Whether this replica starts a new delivery to this key at once (else the scheduler takes it). */
  startNow(apiKeyId: string): boolean;
}

export interface IngestResult {
  fresh: number;
  duplicates: number;
  deliveries: number;
  /** Deliveries created leased to this replica, to start now. */
  jobs: DeliveryJob[];
}

/** The webhook body of an event: `{ id, type, timestamp, merchantId, data }`. */
export function webhookBody(e: EventEnvelope): string {
  const payload: Omit<WebhookPayload, 'type'> & { type: string } = { id: e.id, type: e.type, timestamp: e.occurredAt, merchantId: e.merchantId, data: e.data };
  return JSON.stringify(payload);
}

/**
 * Applies a batch of events in one transaction: records each event id (the inbox: an id seen
 * before is skipped, which makes redelivered and re-published events harmless), updates the
 * endpoints read model from `api_key.*` events, and creates one Pending delivery per webhook
 * event and subscribed endpoint of its merchant. The caller acks the messages after this commits.
 * A batch without `api_key.*` events takes a shorter path of two statements (`ingestWebhookEvents`).
 */
export async function ingestEvents(orm: MikroORM, batch: EventEnvelope[], opts: IngestOptions): Promise<IngestResult> {
  const unique = [...new Map(batch.map((e) => [e.id, e])).values()];
  if (!unique.some((e) => isApiKeyEventType(e.type))) return ingestWebhookEvents(orm, unique, batch.length, opts);
  return orm.em.fork().transactional(async (em) => {
    const rows = unique.map((e) => ({
      id: e.id,
      type: e.type,
      merchant_id: e.merchantId,
      occurred_at: e.occurredAt,
      body: isWebhookEventType(e.type) ? webhookBody(e) : null,
    }));
    const inserted = await queryRows<{ id: string }>(
      em,
      `insert into "events" ("id", "type", "merchant_id", "occurred_at", "body")
       select * from jsonb_to_recordset(?::jsonb) as r("id" uuid, "type" text, "merchant_id" uuid, "occurred_at" timestamptz, "body" text)
       on conflict ("id") do nothing returning "id"`,
      [JSON.stringify(rows)],
    );
    const freshIds = new Set(inserted.map((r) => r.id));
    const fresh = unique.filter((e) => freshIds.has(e.id));
    const bodies = new Map(rows.map((r) => [r.id, r.body]));

    const changes = fresh.flatMap((e) => {
      if (!isApiKeyEventType(e.type)) return [];
      const parsed = ApiKeyEndpointState.safeParse(e.data);
      return parsed.success ? [{ state: parsed.data, occurredAt: e.occurredAt }] : [];
    });
    const applied = await applyEndpointStates(em, changes.map((c) => c.state));

    const webhookEvents = fresh.filter((e) => isWebhookEventType(e.type));
    let planned: { deliveries: DeliveryRow[]; jobs: DeliveryJob[] } = { deliveries: [], jobs: [] };
    if (webhookEvents.length) {
      const endpointRows = await queryRows<EndpointRow>(em, ENDPOINTS_OF_MERCHANTS.replace('$1', '?'), [`{${merchantsOf(webhookEvents).join(',')}}`]);
      planned = planDeliveries(webhookEvents, endpointRows, bodies, opts);
      if (planned.deliveries.length) {
        await queryRows(
          em,
          `insert into "deliveries" ("id", "event_id", "event_type", "merchant_id", "api_key_id", "url", "status", "scheduled_attempts", "next_attempt_at", "lease_until", "created_at", "updated_at")
           select r."id", r."event_id", r."event_type", r."merchant_id", r."api_key_id", r."url", 'Pending', 0, now(), r."lease_until", now(), now()
             from jsonb_to_recordset(?::jsonb) as r("id" uuid, "event_id" uuid, "event_type" text, "merchant_id" uuid, "api_key_id" uuid, "url" text, "lease_until" timestamptz)
           on conflict ("event_id", "api_key_id") do nothing`,
          [JSON.stringify(planned.deliveries)],
        );
      }
    }
    const caughtUp = await catchUpEndpoints(em, changes, applied);
    return { fresh: fresh.length, duplicates: batch.length - fresh.length, deliveries: planned.deliveries.length + caughtUp, jobs: planned.jobs };
  });
}

interface EndpointRow {
  api_key_id: string;
  merchant_id: string;
  url: string;
  event_types: string[] | null;
  enabled: boolean;
  revoked: boolean;
  version: number;
}

/** The live endpoints of the merchants `$1` (a uuid array), on the index of live endpoints alone (see Migration20261124200000_live_endpoints_index). */
export const ENDPOINTS_OF_MERCHANTS = `select "api_key_id", "merchant_id", "url", "event_types", "enabled", "revoked", "version" from "endpoints"
  where "merchant_id" = any($1::uuid[]) and "enabled" and not "revoked" and "url" is not null`;

const merchantsOf = (events: EventEnvelope[]) => [...new Set(events.map((e) => e.merchantId))];

interface DeliveryRow {
  id: string;
  event_id: string;
  event_type: string;
  merchant_id: string;
  api_key_id: string;
  url: string;
  lease_until: string | null;
}

/**
 * One Pending delivery per event and endpoint that accepts it; those this replica has room to
 * start now are leased to it and also answered as jobs.
 */
function planDeliveries(events: EventEnvelope[], endpointRows: EndpointRow[], bodies: Map<string, string | null>, opts: IngestOptions): { deliveries: DeliveryRow[]; jobs: DeliveryJob[] } {
  const byMerchant = new Map<string, Endpoint[]>();
  for (const r of endpointRows) {
    const ep = Object.assign(new Endpoint(), { apiKeyId: r.api_key_id, merchantId: r.merchant_id, url: r.url, eventTypes: r.event_types, enabled: r.enabled, revoked: r.revoked, version: r.version });
    byMerchant.set(ep.merchantId, [...(byMerchant.get(ep.merchantId) ?? []), ep]);
  }
  const leaseUntil = Date.now() + opts.leaseMs;
  const deliveries: DeliveryRow[] = [];
  const jobs: DeliveryJob[] = [];
  for (const e of events) {
    for (const ep of byMerchant.get(e.merchantId) ?? []) {
      if (!ep.accepts(e.type)) continue;
      const id = randomUUID();
      const startNow = opts.startNow(ep.apiKeyId);
      deliveries.push({ id, event_id: e.id, event_type: e.type, merchant_id: e.merchantId, api_key_id: ep.apiKeyId, url: ep.url!, lease_until: startNow ? new Date(leaseUntil).toISOString() : null });
      if (startNow) jobs.push({ deliveryId: id, eventId: e.id, eventType: e.type, apiKeyId: ep.apiKeyId, merchantId: e.merchantId, url: ep.url!, body: bodies.get(e.id)!, trigger: 'Scheduled', scheduledAttempts: 0, leaseUntil });
    }
  }
  return { deliveries, jobs };
}

/**
 * `ingestEvents` for a batch without `api_key.*` events (nearly every batch: those change the
 * endpoints the others are matched against, and take the transactional path above). Two
 * statements and no transaction, where the general path costs four to six and a transaction:
 * a read of the merchants' endpoints, then one statement that records the events in the inbox
 * and creates the deliveries of those it recorded, atomically (a statement is its own
 * transaction, and the deliveries join the inbox rows it inserted, so an event seen before gets
 * none). The endpoints are read before the inbox write instead of after it in one transaction;
 * under READ COMMITTED both read what was committed at the time of the read.
 */
async function ingestWebhookEvents(orm: MikroORM, unique: EventEnvelope[], received: number, opts: IngestOptions): Promise<IngestResult> {
  const webhookEvents = unique.filter((e) => isWebhookEventType(e.type));
  const merchants = merchantsOf(webhookEvents);
  // Unnamed: planned for each batch with the table as it is. The endpoints start empty in a new
  // deployment, and a plan a connection made then (a scan) would be kept as merchants add keys.
  const endpointRows = merchants.length ? (await queryPrepared<EndpointRow>(orm, undefined, ENDPOINTS_OF_MERCHANTS, [merchants])).rows : [];
  const bodies = new Map(unique.map((e) => [e.id, isWebhookEventType(e.type) ? webhookBody(e) : null]));
  const { deliveries, jobs } = planDeliveries(webhookEvents, endpointRows, bodies, opts);
  const rows = unique.map((e) => ({ id: e.id, type: e.type, merchant_id: e.merchantId, occurred_at: e.occurredAt, body: bodies.get(e.id) }));
  const res = await queryPrepared<{ fresh: string[]; deliveries: string[] }>(
    orm,
    'webhooks_ingest_events',
    `with fresh as (
       insert into "events" ("id", "type", "merchant_id", "occurred_at", "body")
       select r."id", r."type", r."merchant_id", r."occurred_at", r."body"
         from jsonb_to_recordset($1::jsonb) as r("id" uuid, "type" text, "merchant_id" uuid, "occurred_at" timestamptz, "body" text)
       on conflict ("id") do nothing returning "id"),
     created as (
       insert into "deliveries" ("id", "event_id", "event_type", "merchant_id", "api_key_id", "url", "status", "scheduled_attempts", "next_attempt_at", "lease_until", "created_at", "updated_at")
       select r."id", r."event_id", r."event_type", r."merchant_id", r."api_key_id", r."url", 'Pending', 0, now(), r."lease_until", now(), now()
         from jsonb_to_recordset($2::jsonb) as r("id" uuid, "event_id" uuid, "event_type" text, "merchant_id" uuid, "api_key_id" uuid, "url" text, "lease_until" timestamptz)
         join fresh f on f."id" = r."event_id"
       on conflict ("event_id", "api_key_id") do nothing returning "id")
     select coalesce((select json_agg("id") from fresh), '[]') as fresh, coalesce((select json_agg("id") from created), '[]') as deliveries`,
    [JSON.stringify(rows), JSON.stringify(deliveries)],
  );
  const { fresh, deliveries: created } = res.rows[0]!;
  const made = new Set(created);
  return { fresh: fresh.length, duplicates: received - fresh.length, deliveries: made.size, jobs: jobs.filter((j) => made.has(j.deliveryId)) };
}
