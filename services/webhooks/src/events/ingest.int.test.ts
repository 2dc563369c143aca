import { randomUUID } from 'node:crypto';
import { beforeEach, describe, expect, it } from 'vitest';
import type { ApiKeyEndpointState, EventEnvelope } from '@billing/contracts';
import { createLogger } from '@billing/service-runtime';
import { sortsAndFilters } from '../../../../tests/support/list-plan.js';
import { useMigratedDatabase } from '../../../../tests/support/migrated-database.js';
import { openWebhooksDatabase } from '../app.js';
import { MIGRATIONS } from '../migrations/index.js';
import { WebhooksConfig } from '../config.js';
import { Delivery } from '../deliveries/delivery.js';
import { DELIVERY_LIST_ORDER } from '../deliveries/deliveries-grpc.js';
import type { DeliveryJob } from '../deliveries/delivery-job.js';
import type { Dispatcher } from '../deliveries/dispatcher.js';
import { DueScheduler } from '../deliveries/due-scheduler.js';
import { ENDPOINTS_OF_MERCHANTS, ingestEvents } from './ingest.js';

const { orm } = useMigratedDatabase({
  open: (url) => openWebhooksDatabase(WebhooksConfig.parse({ DATABASE_URL: url })),
  schema: 'webhooks',
  migrations: MIGRATIONS,
});
const merchantId = randomUUID();

beforeEach(async () => {
  await orm().em.getConnection().execute('truncate "events", "endpoints", "deliveries", "attempts", "replays" cascade');
});

const event = (type: string, data: Record<string, unknown> = {}, merchant = merchantId): EventEnvelope => ({ id: randomUUID(), type, version: 1, occurredAt: new Date().toISOString(), merchantId: merchant, data });

const endpointEvent = (state: Partial<ApiKeyEndpointState> & { apiKeyId: string }): EventEnvelope =>
  event('api_key.webhook_configured', { merchantId, webhookUrl: 'https://example.com/hook', webhookEvents: null, webhookEnabled: true, revoked: false, version: 2, ...state });

const always = { leaseMs: 60_000, startNow: () => true };

async function deliveries() {
  return orm().em.getConnection().execute(`select "event_id", "api_key_id", "url", "status", "lease_until" from "deliveries" order by "created_at"`);
}

describe('ingestEvents', () => {
  it('creates one delivery per event and subscribed key, once, however often the event arrives', async () => {
    const a = randomUUID();
    const b = randomUUID();
    await ingestEvents(orm(), [endpointEvent({ apiKeyId: a }), endpointEvent({ apiKeyId: b, webhookEvents: ['subscription.created'] })], always);
    const member = event('member.created', { id: 'm1' });
    const first = await ingestEvents(orm(), [member, member], always);
    const again = await ingestEvents(orm(), [member], always);
    expect(first).toMatchObject({ fresh: 1, duplicates: 1, deliveries: 1 });
    expect(first.jobs).toHaveLength(1);
    expect(first.jobs[0]).toMatchObject({ eventId: member.id, apiKeyId: a, url: 'https://example.com/hook', trigger: 'Scheduled', scheduledAttempts: 0 });
    expect(JSON.parse(first.jobs[0]!.body)).toEqual({ id: member.id, type: 'member.created', timestamp: member.occurredAt, merchantId, data: { id: 'm1' } });
    expect(again).toMatchObject({ fresh: 0, duplicates: 1, deliveries: 0, jobs: [] });
    expect(await deliveries()).toHaveLength(1);
  });

  it('in a batch without api_key events, records seen and new events alike once and creates deliveries and jobs only for the new', async () => {
    const a = randomUUID();
    await ingestEvents(orm(), [endpointEvent({ apiKeyId: a })], always);
    const seen = event('member.created', { id: 'm1' });
    await ingestEvents(orm(), [seen], always);
    const fresh = event('subscription.created', { id: 's1' });
    const internal = event('billing_run.completed', { id: 'r1' });
    const other = event('member.created', { id: 'm2' }, randomUUID());
    const result = await ingestEvents(orm(), [seen, fresh, internal, other, fresh], always);
    expect(result).toMatchObject({ fresh: 3, duplicates: 2, deliveries: 1 });
    expect(result.jobs.map((j) => [j.eventId, j.apiKeyId])).toEqual([[fresh.id, a]]);
    expect(JSON.parse(result.jobs[0]!.body)).toEqual({ id: fresh.id, type: 'subscription.created', timestamp: fresh.occurredAt, merchantId, data: { id: 's1' } });
    const rows = await deliveries();
    expect(rows.map((r: { event_id: string }) => r.event_id).sort()).toEqual([seen.id, fresh.id].sort());
    const inbox = await orm().em.getConnection().execute(`select "id", "type", "body" from "events" where "id" = any(?::uuid[])`, [`{${[fresh.id, internal.id, other.id].join(',')}}`]);
    expect(inbox).toHaveLength(3);
    expect(inbox.find((r: { id: string }) => r.id === internal.id).body).toBeNull();
  });

  it("reads a merchant's live endpoints on their own index, however many of its keys have no webhook", async () => {
    // A merchant with 2,000 API keys without a webhook URL (the read model has a row per key) and one endpoint.
    const conn = orm().em.getConnection();
    await conn.execute(
      `insert into "endpoints" ("api_key_id", "merchant_id", "url", "event_types", "enabled", "revoked", "version", "updated_at")
       select gen_random_uuid(), ?::uuid, null, null, true, false, 1, now() from generate_series(1, 2000)`,
      [merchantId],
    );
    await conn.execute('analyze "endpoints"');
    const live = randomUUID();
    await ingestEvents(orm(), [endpointEvent({ apiKeyId: live })], always);
    const result = await ingestEvents(orm(), [event('member.created', { id: 'm1' })], always);
    expect(result.jobs.map((j) => j.apiKeyId)).toEqual([live]);
    // Planned for this merchant, with the statistics taken above.
    const [{ 'QUERY PLAN': [plan] }] = await conn.execute(
      `explain (analyze, buffers, format json) ${ENDPOINTS_OF_MERCHANTS.replace('$1::uuid[]', `'{${merchantId}}'::uuid[]`)}`,
    );
    const text = JSON.stringify(plan);
    expect(text).toContain('endpoints_live_merchant_index');
    // With the index by merchant alone, the plan was a scan of the table: 2,001 rows read and 2,000 removed.
    expect(plan.Plan['Shared Hit Blocks'] + plan.Plan['Shared Read Blocks']).toBeLessThan(5);
  });

  it('keeps the newest endpoint state whatever order the events arrive in', async () => {
    const key = randomUUID();
    await ingestEvents(orm(), [endpointEvent({ apiKeyId: key, version: 5, webhookEnabled: false })], always);
    await ingestEvents(orm(), [endpointEvent({ apiKeyId: key, version: 4, webhookEnabled: true })], always);
    await ingestEvents(orm(), [event('member.created')], always);
    expect(await deliveries()).toHaveLength(0);
    await ingestEvents(orm(), [endpointEvent({ apiKeyId: key, version: 6, webhookEnabled: true, webhookUrl: 'https://example.com/v6' })], always);
    await ingestEvents(orm(), [event('member.created')], always);
    expect((await deliveries()).map((d: { url: string }) => d.url)).toEqual(['https://example.com/v6']);
  });

  it('delivers an event that arrived before the change enabling its endpoint when it occurred after that change, once', async () => {
    // Events reach the bus through each service's outbox: billing's member.created can arrive
    // before identity's api_key event for a webhook enabled just before it (it was never delivered).
    const key = randomUUID();
    const enabled = endpointEvent({ apiKeyId: key, version: 2 });
    const at = (e: EventEnvelope, ms: number) => ({ ...e, occurredAt: new Date(Date.parse(enabled.occurredAt) + ms).toISOString() });
    const after = at(event('member.created', { id: 'after' }), 5);
    const before = at(event('member.created', { id: 'before' }), -5);
    const otherMerchant = at(event('member.created', { id: 'other' }, randomUUID()), 5);
    const internal = at(event('billing_run.completed'), 5);
    await ingestEvents(orm(), [before, after, otherMerchant, internal], always);
    expect(await deliveries()).toHaveLength(0);

    const res = await ingestEvents(orm(), [enabled], always);
    expect(res.deliveries).toBe(1);
    expect(await deliveries()).toEqual([expect.objectContaining({ event_id: after.id, api_key_id: key, url: 'https://example.com/hook', status: 'Pending', lease_until: null })]);
    // The same change again, or an older state of the key, adds nothing.
    await ingestEvents(orm(), [enabled, endpointEvent({ apiKeyId: key, version: 1 })], always);
    expect(await deliveries()).toHaveLength(1);
    // A later change of the live endpoint (before `after` occurred) does not deliver again what it already has.
    await ingestEvents(orm(), [at(endpointEvent({ apiKeyId: key, version: 3, webhookUrl: 'https://example.com/moved' }), 1)], always);
    expect(await deliveries()).toHaveLength(1);
  });

  it('catches up only the event types the endpoint subscribes to, and nothing for a change that leaves it disabled', async () => {
    const [subscribed, disabled] = [randomUUID(), randomUUID()];
    const member = event('member.created');
    const sub = event('subscription.created');
    await new Promise((r) => setTimeout(r, 5));
    await ingestEvents(orm(), [member, sub], always);
    const past = (e: EventEnvelope) => ({ ...e, occurredAt: new Date(Date.parse(member.occurredAt) - 1).toISOString() });
    await ingestEvents(orm(), [past(endpointEvent({ apiKeyId: subscribed, webhookEvents: ['subscription.created'] })), past(endpointEvent({ apiKeyId: disabled, webhookEnabled: false }))], always);
    expect((await deliveries()).map((d: { event_id: string; api_key_id: string }) => [d.event_id, d.api_key_id])).toEqual([[sub.id, subscribed]]);
  });

  it('delivers nothing for revoked keys, other merchants, internal types, or an empty subscription', async () => {
    await ingestEvents(
      orm(),
      [
        endpointEvent({ apiKeyId: randomUUID(), revoked: true }),
        endpointEvent({ apiKeyId: randomUUID(), webhookEvents: [] }),
        event('api_key.webhook_configured', { apiKeyId: randomUUID(), merchantId: randomUUID(), webhookUrl: 'https://x.test', webhookEvents: null, webhookEnabled: true, revoked: false, version: 2 }, randomUUID()),
      ],
      always,
    );
    const res = await ingestEvents(orm(), [event('member.created'), event('api_key.created', { nonsense: true }), event('unknown.type')], always);
    expect(res).toMatchObject({ fresh: 3, deliveries: 0 });
    expect(await deliveries()).toHaveLength(0);
  });

  it('leaves deliveries it cannot start now due in the database, unleased', async () => {
    await ingestEvents(orm(), [endpointEvent({ apiKeyId: randomUUID() })], always);
    const res = await ingestEvents(orm(), [event('member.created')], { leaseMs: 60_000, startNow: () => false });
    expect(res.jobs).toHaveLength(0);
    const [d] = await deliveries();
    expect(d).toMatchObject({ status: 'Pending', lease_until: null });
  });
});

describe('DueScheduler', () => {
  /** Collects what the scheduler hands over, with room for everything. */
  class Collector {
    jobs: DeliveryJob[] = [];
    room = () => 10_000;
    busyEndpoints = () => [];
    submit = (j: DeliveryJob) => this.jobs.push(j);
  }
  const logger = createLogger('scheduler-test', 'silent');

  it('lets two replicas claim due deliveries without taking any twice, and leases what it took', async () => {
    const keys = Array.from({ length: 3 }, () => randomUUID());
    await ingestEvents(orm(), keys.map((k) => endpointEvent({ apiKeyId: k })), always);
    await ingestEvents(orm(), Array.from({ length: 50 }, () => event('member.created')), { leaseMs: 60_000, startNow: () => false });
    const [a, b] = [new Collector(), new Collector()];
    const opts = { pollMs: 1000, leaseMs: 30_000, perEndpoint: 20 };
    const sa = new DueScheduler(orm(), a as unknown as Dispatcher, opts, logger);
    const sb = new DueScheduler(orm(), b as unknown as Dispatcher, opts, logger);
    for (let i = 0; i < 10; i++) await Promise.all([sa.round(), sb.round()]);
    const ids = [...a.jobs, ...b.jobs].map((j) => j.deliveryId);
    expect(ids).toHaveLength(150);
    expect(new Set(ids).size).toBe(150);
    const leased = await orm().em.getConnection().execute(`select count(*)::int as n from "deliveries" where "lease_until" > now()`);
    expect(leased[0].n).toBe(150);
    // Leased deliveries are not due again until the lease ends.
    const c = new Collector();
    await new DueScheduler(orm(), c as unknown as Dispatcher, opts, logger).round();
    expect(c.jobs).toHaveLength(0);
  });

  it('holds a disabled endpoint\'s deliveries until it is enabled again, then sends them to its current URL', async () => {
    const key = randomUUID();
    await ingestEvents(orm(), [endpointEvent({ apiKeyId: key, version: 2 })], always);
    await ingestEvents(orm(), [event('member.created')], { leaseMs: 60_000, startNow: () => false });
    await ingestEvents(orm(), [endpointEvent({ apiKeyId: key, version: 3, webhookEnabled: false })], always);
    const opts = { pollMs: 1000, leaseMs: 30_000, perEndpoint: 10 };
    const paused = new Collector();
    await new DueScheduler(orm(), paused as unknown as Dispatcher, opts, logger).round();
    expect(paused.jobs).toHaveLength(0);
    await ingestEvents(orm(), [endpointEvent({ apiKeyId: key, version: 4, webhookUrl: 'https://example.com/fixed' })], always);
    const resumed = new Collector();
    await new DueScheduler(orm(), resumed as unknown as Dispatcher, opts, logger).round();
    expect(resumed.jobs.map((j) => j.url)).toEqual(['https://example.com/fixed']);
  });

  it('fails the pending deliveries of a key when it is revoked', async () => {
    const key = randomUUID();
    await ingestEvents(orm(), [endpointEvent({ apiKeyId: key, version: 2 })], always);
    await ingestEvents(orm(), [event('member.created')], { leaseMs: 60_000, startNow: () => false });
    await ingestEvents(orm(), [endpointEvent({ apiKeyId: key, version: 3, revoked: true })], always);
    const [d] = await deliveries();
    expect(d).toMatchObject({ status: 'Failed' });
  });

  it('drops a replay queued before its key was revoked instead of sending it, and still sends the replays of other keys', async () => {
    const [revoked, live] = [randomUUID(), randomUUID()];
    await ingestEvents(orm(), [endpointEvent({ apiKeyId: revoked, version: 2 }), endpointEvent({ apiKeyId: live, version: 2 })], always);
    await ingestEvents(orm(), [event('member.created')], { leaseMs: 60_000, startNow: () => false });
    const conn = orm().em.getConnection();
    await conn.execute(`insert into "replays" ("id", "delivery_id", "requested_at") select gen_random_uuid(), "id", now() from "deliveries"`);
    await ingestEvents(orm(), [endpointEvent({ apiKeyId: revoked, version: 3, revoked: true })], always);
    const c = new Collector();
    await new DueScheduler(orm(), c as unknown as Dispatcher, { pollMs: 1000, leaseMs: 30_000, perEndpoint: 10 }, logger).round();
    const replayed = c.jobs.filter((j) => j.trigger === 'Manual');
    expect(replayed.map((j) => j.apiKeyId)).toEqual([live]);
    const left = await conn.execute(`select d."api_key_id" from "replays" r join "deliveries" d on d."id" = r."delivery_id"`);
    expect(left.map((r: { api_key_id: string }) => r.api_key_id)).toEqual([live]);
  });

  it('takes at most perEndpoint deliveries of one endpoint per round, so others are not starved', async () => {
    const [big, small] = [randomUUID(), randomUUID()];
    await ingestEvents(orm(), [endpointEvent({ apiKeyId: big, webhookEvents: ['member.created'] }), endpointEvent({ apiKeyId: small, webhookEvents: ['payment_method.added'] })], always);
    await ingestEvents(orm(), Array.from({ length: 40 }, () => event('member.created')), { leaseMs: 60_000, startNow: () => false });
    await ingestEvents(orm(), [event('payment_method.added')], { leaseMs: 60_000, startNow: () => false });
    const c = new Collector();
    await new DueScheduler(orm(), c as unknown as Dispatcher, { pollMs: 1000, leaseMs: 30_000, perEndpoint: 10 }, logger).round();
    expect(c.jobs.filter((j) => j.apiKeyId === big)).toHaveLength(10);
    expect(c.jobs.filter((j) => j.apiKeyId === small)).toHaveLength(1);
  });
});

describe('ListDeliveries', () => {
  it("pages a merchant's deliveries of one status newest first from an index, without sorting or filtering out its others", async () => {
    const sql = orm().em.fork().createQueryBuilder(Delivery).select('*').where({ merchantId, status: 'Failed' }).orderBy(DELIVERY_LIST_ORDER).limit(200).offset(800).getFormattedQuery();
    // With the index by merchant alone: every delivery of the merchant read and the other statuses filtered out.
    expect(await sortsAndFilters(orm(), sql)).toEqual([]);
  });
});
