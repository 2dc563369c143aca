import { randomUUID } from 'node:crypto';
import { beforeEach, describe, expect, it } from 'vitest';
import { DomainError, type ApiKeyEndpointState, type EventEnvelope } from '@billing/contracts';
import { createLogger, type CallScope } from '@billing/service-runtime';
import { useMigratedDatabase } from '../../../../tests/support/migrated-database.js';
import { openWebhooksDatabase } from '../app.js';
import { WebhooksConfig } from '../config.js';
import type { DeliveryJob } from '../deliveries/delivery-job.js';
import type { Dispatcher } from '../deliveries/dispatcher.js';
import { Replay } from '../deliveries/delivery.js';
import { DueScheduler } from '../deliveries/due-scheduler.js';
import { ingestEvents } from '../events/ingest.js';
import { MIGRATIONS } from '../migrations/index.js';
import type { EndpointChange } from './endpoint-changes.js';
import { syncEndpoint, toEndpointState, type EndpointStateSource } from './sync-endpoint.js';

const { orm, rows } = useMigratedDatabase({
  open: (url) => openWebhooksDatabase(WebhooksConfig.parse({ DATABASE_URL: url })),
  schema: 'webhooks',
  migrations: MIGRATIONS,
});
const merchantId = randomUUID();
const always = { leaseMs: 60_000, startNow: () => false };

beforeEach(async () => {
  await orm().em.getConnection().execute('truncate "events", "endpoints", "deliveries", "attempts", "replays" cascade');
});

/** Identity as the sync sees it: each key's committed state, in the scope rules of identity. */
class FakeIdentity implements EndpointStateSource {
  readonly keys = new Map<string, EndpointChange>();
  reads: { scope: CallScope; apiKeyId: string }[] = [];

  commit(state: Partial<ApiKeyEndpointState> & { apiKeyId: string; version: number }, at = new Date()): EndpointChange {
    const change = { state: { merchantId, webhookUrl: 'https://example.com/hook', webhookEvents: null, webhookEnabled: true, revoked: false, ...state }, occurredAt: at.toISOString() };
    this.keys.set(state.apiKeyId, change);
    return change;
  }

  async read(scope: CallScope, apiKeyId: string): Promise<EndpointChange> {
    this.reads.push({ scope, apiKeyId });
    const change = this.keys.get(apiKeyId);
    if (!change || (scope.kind === 'merchant' && change.state.merchantId !== scope.merchantId)) throw new DomainError('not_found', 'API key not found.');
    return change;
  }
}

const scope: CallScope = { kind: 'merchant', merchantId };
const event = (type: string, data: Record<string, unknown> = {}, occurredAt = new Date()): EventEnvelope => ({ id: randomUUID(), type, version: 1, occurredAt: occurredAt.toISOString(), merchantId, data });
/** The `api_key.*` event identity's outbox publishes for a change (it arrives after the sync). */
const eventOf = (c: EndpointChange): EventEnvelope => ({ ...event('api_key.webhook_configured', c.state, new Date(c.occurredAt)), merchantId: c.state.merchantId });

async function endpoint(apiKeyId: string) {
  const [row] = await rows(`select "url", "event_types", "enabled", "revoked", "version" from "endpoints" where "api_key_id" = ?`, [apiKeyId]);
  return row;
}
const deliveries = () => rows<{ event_id: string; api_key_id: string; url: string; status: string }>(`select "event_id", "api_key_id", "url", "status" from "deliveries" order by "created_at"`);

class Collector {
  jobs: DeliveryJob[] = [];
  room = () => 10_000;
  busyEndpoints = () => [];
  submit = (j: DeliveryJob) => this.jobs.push(j);
}
const claim = async () => {
  const c = new Collector();
  await new DueScheduler(orm(), c as unknown as Dispatcher, { pollMs: 1000, leaseMs: 30_000, perEndpoint: 10 }, createLogger('sync-test', 'silent')).round();
  return c.jobs;
};

describe('syncEndpoint', () => {
  it("stores identity's committed state before its event arrives, and the event then changes nothing", async () => {
    const identity = new FakeIdentity();
    const key = randomUUID();
    await ingestEvents(orm(), [eventOf(identity.commit({ apiKeyId: key, version: 2 }))], always);
    const moved = identity.commit({ apiKeyId: key, version: 3, webhookUrl: 'https://example.com/moved', webhookEvents: ['member.created'] });

    expect(await syncEndpoint(orm(), identity, scope, key)).toEqual({ version: 3, applied: true, caughtUp: 0 });
    expect(identity.reads).toEqual([{ scope, apiKeyId: key }]);
    expect(await endpoint(key)).toEqual({ url: 'https://example.com/moved', event_types: ['member.created'], enabled: true, revoked: false, version: 3 });

    const late = await ingestEvents(orm(), [eventOf(moved)], always);
    expect(late.deliveries).toBe(0);
    expect(await endpoint(key)).toMatchObject({ url: 'https://example.com/moved', version: 3 });
    expect(await syncEndpoint(orm(), identity, scope, key)).toEqual({ version: 3, applied: false, caughtUp: 0 });
  });

  it('never overwrites a newer state the copy already holds', async () => {
    const identity = new FakeIdentity();
    const key = randomUUID();
    const stale = identity.commit({ apiKeyId: key, version: 4, webhookEnabled: false });
    await ingestEvents(orm(), [eventOf({ ...stale, state: { ...stale.state, version: 5, webhookUrl: 'https://example.com/v5', webhookEnabled: true } })], always);
    expect(await syncEndpoint(orm(), identity, scope, key)).toEqual({ version: 5, applied: false, caughtUp: 0 });
    expect(await endpoint(key)).toMatchObject({ url: 'https://example.com/v5', enabled: true, version: 5 });
  });

  it("revoked: fails the key's Pending deliveries and no later event is delivered to it", async () => {
    const identity = new FakeIdentity();
    const key = randomUUID();
    await ingestEvents(orm(), [eventOf(identity.commit({ apiKeyId: key, version: 2 }))], always);
    await ingestEvents(orm(), [event('member.created', { id: 'before' })], always);
    expect((await deliveries()).map((d) => d.status)).toEqual(['Pending']);

    identity.commit({ apiKeyId: key, version: 3, revoked: true });
    expect(await syncEndpoint(orm(), identity, scope, key)).toMatchObject({ version: 3, applied: true });
    expect((await deliveries()).map((d) => d.status)).toEqual(['Failed']);
    await ingestEvents(orm(), [event('member.created', { id: 'after' })], always);
    expect(await deliveries()).toHaveLength(1);
    expect(await claim()).toEqual([]);
  });

  it('disabled: an event raised after the sync gets no delivery', async () => {
    const identity = new FakeIdentity();
    const key = randomUUID();
    await ingestEvents(orm(), [eventOf(identity.commit({ apiKeyId: key, version: 2 }))], always);
    identity.commit({ apiKeyId: key, version: 3, webhookEnabled: false });
    await syncEndpoint(orm(), identity, scope, key);
    await ingestEvents(orm(), [event('member.created')], always);
    expect(await deliveries()).toEqual([]);
  });

  it("a replay claimed after a URL change's sync goes to the new URL", async () => {
    const identity = new FakeIdentity();
    const key = randomUUID();
    await ingestEvents(orm(), [eventOf(identity.commit({ apiKeyId: key, version: 2, webhookUrl: 'https://example.com/old' }))], always);
    await ingestEvents(orm(), [event('member.created')], always);
    const [delivery] = await rows<{ id: string }>(`select "id" from "deliveries"`);
    await rows(`update "deliveries" set "status" = 'Succeeded', "next_attempt_at" = null`);

    identity.commit({ apiKeyId: key, version: 3, webhookUrl: 'https://example.com/new' });
    await syncEndpoint(orm(), identity, scope, key);
    await orm().em.fork().persistAndFlush(Object.assign(new Replay(), { deliveryId: delivery!.id }));
    expect((await claim()).map((j) => [j.trigger, j.url])).toEqual([['Manual', 'https://example.com/new']]);
  });

  it('enabled: catches up the events already received that occurred at or after the change, once, as the event would', async () => {
    const identity = new FakeIdentity();
    const key = randomUUID();
    const changedAt = new Date();
    const before = event('member.created', { id: 'before' }, new Date(changedAt.getTime() - 5));
    const after = event('member.created', { id: 'after' }, new Date(changedAt.getTime() + 5));
    await ingestEvents(orm(), [eventOf(identity.commit({ apiKeyId: key, version: 1, webhookUrl: null, webhookEnabled: false }))], always);
    await ingestEvents(orm(), [before, after], always);
    expect(await deliveries()).toEqual([]);

    const enabled = identity.commit({ apiKeyId: key, version: 2 }, changedAt);
    expect(await syncEndpoint(orm(), identity, scope, key)).toEqual({ version: 2, applied: true, caughtUp: 1 });
    expect(await deliveries()).toEqual([{ event_id: after.id, api_key_id: key, url: 'https://example.com/hook', status: 'Pending' }]);
    await ingestEvents(orm(), [eventOf(enabled)], always);
    expect(await deliveries()).toHaveLength(1);
  });

  it("answers not_found for another merchant's key and changes nothing", async () => {
    const identity = new FakeIdentity();
    const key = randomUUID();
    identity.commit({ apiKeyId: key, version: 2 });
    await expect(syncEndpoint(orm(), identity, { kind: 'merchant', merchantId: randomUUID() }, key)).rejects.toMatchObject({ code: 'not_found' });
    expect(await endpoint(key)).toBeUndefined();
  });
});

describe('toEndpointState', () => {
  it("reads identity's message as the state its events carry", () => {
    const base = { apiKeyId: randomUUID(), merchantId, webhookEnabled: true, revoked: false, version: 7, changedAt: new Date().toISOString() };
    expect(toEndpointState({ ...base, webhookUrl: 'https://example.com/h', webhookEventsAll: true, webhookEvents: [] })).toEqual({ apiKeyId: base.apiKeyId, merchantId, webhookUrl: 'https://example.com/h', webhookEvents: null, webhookEnabled: true, revoked: false, version: 7 });
    expect(toEndpointState({ ...base, webhookEventsAll: false, webhookEvents: [] })).toMatchObject({ webhookUrl: null, webhookEvents: [] });
  });
});
