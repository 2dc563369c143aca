import { randomUUID } from 'node:crypto';
import { jetstream } from '@nats-io/jetstream';
import { connect } from '@nats-io/transport-node';
import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { eventSubject } from '@billing/contracts';
import { natsServerOptions } from '@billing/service-runtime';
import { apiClient, eventually, unique, type ApiClient } from '../support/fixtures.js';
import { startTestPlatform, type TestPlatform } from '../support/platform.js';
import { memberEvent, onlyFor, webhookFixtures } from '../support/webhook-fixtures.js';
import { startWebhookReceiver, type WebhookReceiver } from '../support/webhook-receiver.js';

/**
 * Webhook delivery end to end: billing and identity commit events, their outbox relays publish
 * them to JetStream, the webhooks service delivers them, signed, to a real local receiver that
 * verifies every request with the `standardwebhooks` library. Runs its own platform for a retry
 * schedule of seconds.
 */
let platform: TestPlatform;
let api: ApiClient;
let receiver: WebhookReceiver;
let fx: ReturnType<typeof webhookFixtures>;

beforeAll(async () => {
  platform = await startTestPlatform({
    services: ['identity', 'billing', 'webhooks', 'gateway'],
    serviceEnv: { webhooks: { WEBHOOK_RETRY_SCHEDULE: '1,1,1', WEBHOOK_RETRY_JITTER: '0', WEBHOOK_POLL_MS: '100' } },
  });
  api = apiClient(platform.gatewayUrl!);
  receiver = await startWebhookReceiver();
  fx = webhookFixtures(api, receiver, platform.adminToken);
}, 120_000);

afterAll(async () => {
  await receiver?.close();
  await platform?.stop();
});

describe('webhook delivery', () => {
  // No span exporter here, so spans are not recorded; the trace context must still flow from the
  // request through billing, its outbox and JetStream to the webhook request.
  it("carries the request's trace id to the webhook request without a trace exporter", async () => {
    const { merchantId, observer } = await fx.merchantWithObserver();
    const key = await fx.createKey(merchantId);
    const path = `/trace/${randomUUID()}`;
    await fx.configure(merchantId, key, path);
    await fx.settle(merchantId, observer);

    const traceId = randomUUID().replaceAll('-', '');
    const res = await api.post(
      '/api/Members',
      { merchantId, email: `${unique('traced')}@example.com`, firstName: 'Ada', lastName: 'Lovelace' },
      { token: key.key, headers: { traceparent: `00-${traceId}-00f067aa0ba902b7-01` } },
    );
    expect(res.status).toBe(201);
    expect(res.headers.get('x-trace-id')).toBe(traceId);
    const [req] = await receiver.waitFor(path, (r) => memberEvent(r, res.body.id).length > 0).then((r) => memberEvent(r, res.body.id));
    expect(String(req!.headers.traceparent)).toMatch(new RegExp(`^00-${traceId}-[0-9a-f]{16}-0[0-9a-f]$`));
  });

  it('delivers member.created, signed per Standard Webhooks, and records the delivery and its attempt', async () => {
    const { merchantId, observer } = await fx.merchantWithObserver();
    const key = await fx.createKey(merchantId);
    const path = `/ok/${randomUUID()}`;
    await fx.configure(merchantId, key, path);
    await fx.settle(merchantId, observer);

    const member = await fx.createMember(merchantId, key.key);
    const [req] = await receiver.waitFor(path, (r) => memberEvent(r, member.id).length > 0).then((r) => memberEvent(r, member.id));
    expect(req!.verified).toBe(true);
    expect(req!.headers['content-type']).toBe('application/json');
    expect(req!.headers['webhook-id']).toBe(req!.payload.id);
    expect(req!.headers['webhook-signature']).toMatch(/^v1,[A-Za-z0-9+/]+=*$/);
    expect(Object.keys(req!.payload).sort()).toEqual(['data', 'id', 'merchantId', 'timestamp', 'type']);
    expect(req!.payload).toMatchObject({ type: 'member.created', merchantId, data: { id: member.id, email: member.email } });
    expect(Date.parse(req!.payload.timestamp)).not.toBeNaN();

    const delivery = await fx.deliveryOf(merchantId, key.key, req!.payload.id, key.id, (d) => d.status === 'Succeeded');
    expect(delivery).toMatchObject({
      eventId: req!.payload.id,
      eventType: 'member.created',
      apiKeyId: key.id,
      url: receiver.url(path),
      status: 'Succeeded',
      attemptCount: 1,
      nextAttemptAt: null,
    });
    expect(delivery.attempts).toHaveLength(1);
    expect(delivery.attempts[0]).toMatchObject({ trigger: 'Scheduled', statusCode: 204, error: null });
    expect(delivery.attempts[0].durationMs).toBeGreaterThanOrEqual(0);
  });

  it('retries after a 500 with the same webhook-id and a fresh signature, then succeeds', async () => {
    const { merchantId, observer } = await fx.merchantWithObserver();
    const key = await fx.createKey(merchantId);
    const path = `/flaky/${randomUUID()}`;
    const email = `${unique('flaky')}@example.com`;
    receiver.respond(path, onlyFor(email, (n) => (n <= 2 ? { status: 500, body: 'boom' } : { status: 200, body: 'ok' })));
    await fx.configure(merchantId, key, path);
    await fx.settle(merchantId, observer);

    const member = await fx.createMember(merchantId, key.key, email);
    const reqs = await receiver.waitFor(path, (r) => memberEvent(r, member.id).length >= 3).then((r) => memberEvent(r, member.id));
    expect(reqs.every((r) => r.verified)).toBe(true);
    expect(new Set(reqs.map((r) => r.headers['webhook-id'])).size).toBe(1);

    const delivery = await fx.deliveryOf(merchantId, key.key, reqs[0]!.payload.id, key.id, (d) => d.status === 'Succeeded');
    expect(delivery.attemptCount).toBe(3);
    expect(delivery.attempts.map((a: any) => a.statusCode)).toEqual([500, 500, 200]);
    expect(delivery.attempts.map((a: any) => a.responseBody)).toEqual(['boom', 'boom', 'ok']);
    expect(delivery.attempts.every((a: any) => a.trigger === 'Scheduled')).toBe(true);
  });

  it('marks a delivery Failed when every scheduled attempt fails, and a manual replay can still succeed it', async () => {
    const { merchantId, observer } = await fx.merchantWithObserver();
    const key = await fx.createKey(merchantId);
    const path = `/down/${randomUUID()}`;
    const email = `${unique('down')}@example.com`;
    let healthy = false;
    receiver.respond(path, onlyFor(email, () => (healthy ? { status: 200 } : { status: 503, body: 'down' })));
    await fx.configure(merchantId, key, path, { webhookEvents: ['member.created'] });
    await fx.settle(merchantId, observer);

    const member = await fx.createMember(merchantId, key.key, email);
    const [first] = await receiver.waitFor(path, (r) => memberEvent(r, member.id).length >= 1).then((r) => memberEvent(r, member.id));
    const failed = await fx.deliveryOf(merchantId, key.key, first!.payload.id, key.id, (d) => d.status === 'Failed');
    expect(failed.attemptCount).toBe(4);
    expect(failed.nextAttemptAt).toBeNull();
    expect(failed.attempts.map((a: any) => a.statusCode)).toEqual([503, 503, 503, 503]);

    healthy = true;
    const replay = await api.post(`/api/WebhookDeliveries/${failed.id}/replay`, undefined, { token: key.key });
    expect(replay.status).toBe(202);
    const succeeded = await fx.deliveryOf(merchantId, key.key, failed.eventId, key.id, (d) => d.status === 'Succeeded');
    expect(succeeded.attempts.at(-1)).toMatchObject({ id: replay.body.attemptId, trigger: 'Manual', statusCode: 200 });

    // Moved to another URL, a replay goes there, and the delivery shows that URL (it kept the old one).
    const moved = `/moved/${randomUUID()}`;
    await fx.configure(merchantId, key, moved, { webhookEvents: ['member.created'] });
    await fx.settle(merchantId, observer);
    expect((await api.post(`/api/WebhookDeliveries/${failed.id}/replay`, undefined, { token: key.key })).status).toBe(202);
    await receiver.waitFor(moved, (r) => memberEvent(r, member.id).length > 0);
    const after = await fx.deliveryOf(merchantId, key.key, failed.eventId, key.id, (d) => d.attempts.length === 6);
    expect(after.url).toBe(receiver.url(moved));
  });

  it('waits at least as long as Retry-After asks on a 429', async () => {
    const { merchantId, observer } = await fx.merchantWithObserver();
    const key = await fx.createKey(merchantId);
    const path = `/busy/${randomUUID()}`;
    const email = `${unique('busy')}@example.com`;
    receiver.respond(path, onlyFor(email, (n) => (n === 1 ? { status: 429, headers: { 'retry-after': '3' } } : { status: 200 })));
    await fx.configure(merchantId, key, path, { webhookEvents: ['member.created'] });
    await fx.settle(merchantId, observer);

    const member = await fx.createMember(merchantId, key.key, email);
    const [first] = await receiver.waitFor(path, (r) => memberEvent(r, member.id).length >= 1).then((r) => memberEvent(r, member.id));
    const pending = await fx.deliveryOf(merchantId, key.key, first!.payload.id, key.id, (d) => d.attempts.length >= 1);
    expect(pending.attempts[0].statusCode).toBe(429);
    if (pending.status === 'Pending') expect(Date.parse(pending.nextAttemptAt) - Date.parse(pending.attempts[0].attemptedAt)).toBeGreaterThanOrEqual(2900);
    const done = await fx.deliveryOf(merchantId, key.key, first!.payload.id, key.id, (d) => d.status === 'Succeeded');
    expect(done.attempts.map((a: any) => a.statusCode)).toEqual([429, 200]);
    expect(Date.parse(done.attempts[1].attemptedAt) - Date.parse(done.attempts[0].attemptedAt)).toBeGreaterThanOrEqual(2900);
  });

  it('sends only subscribed types: a filter, an empty list and a disabled key', async () => {
    const { merchantId, observer } = await fx.merchantWithObserver();
    const filtered = await fx.createKey(merchantId);
    const none = await fx.createKey(merchantId);
    const disabled = await fx.createKey(merchantId);
    const paths = { filtered: `/filtered/${randomUUID()}`, none: `/none/${randomUUID()}`, disabled: `/disabled/${randomUUID()}` };
    await fx.configure(merchantId, filtered, paths.filtered, { webhookEvents: ['payment_method.added'] });
    await fx.configure(merchantId, none, paths.none, { webhookEvents: [] });
    await fx.configure(merchantId, disabled, paths.disabled);
    await fx.configure(merchantId, disabled, paths.disabled, { webhookEnabled: false });
    await fx.settle(merchantId, observer);

    const member = await fx.createMember(merchantId, observer.key);
    const pm = await api.post(
      `/api/members/${member.id}/payment-methods`,
      { merchantId, type: 'Card', brand: 'Visa', last4: '4242', expiryMonth: 12, expiryYear: 2030 },
      { token: observer.key, headers: { 'idempotency-key': randomUUID() } },
    );
    expect(pm.status).toBe(201);

    // The filtered key gets payment_method.added; both events were decided under the same settings.
    const got = await receiver.waitFor(paths.filtered, (r) => r.some((x) => x.payload?.type === 'payment_method.added'));
    expect(got.every((r) => r.verified && r.payload.type === 'payment_method.added')).toBe(true);
    // The observer (every type) got member.created, so it was processed by now.
    const observed = receiver.received().filter((r) => r.payload?.type === 'member.created' && r.payload.data.id === member.id);
    expect(observed.length).toBeGreaterThan(0);
    expect(receiver.received(paths.none)).toHaveLength(0);
    expect(receiver.received(paths.disabled)).toHaveLength(0);

    const list = await api.get(`/api/WebhookDeliveries?merchantId=${merchantId}&eventType=member.created&pageSize=200`, { token: observer.key });
    const keysWithMemberEvent = new Set(list.body.items.filter((d: any) => d.eventId === observed[0]!.payload.id).map((d: any) => d.apiKeyId));
    expect(keysWithMemberEvent).toEqual(new Set([observer.id]));
  });

  it('never delivers internal api_key events', async () => {
    const { merchantId, observer } = await fx.merchantWithObserver();
    await fx.settle(merchantId, observer);
    const internal = receiver.received().filter((r) => String(r.payload?.type ?? '').startsWith('api_key.'));
    expect(internal).toHaveLength(0);
    const list = await api.get(`/api/WebhookDeliveries?merchantId=${merchantId}&eventType=api_key.webhook_configured`, { token: observer.key });
    expect(list.status).toBe(200);
    expect(list.body.totalCount).toBe(0);
  });
});

describe('webhook delivery API', () => {
  it('replays a delivery: 202 with a new attemptId on every call, same webhook-id, signed at the time of the attempt', async () => {
    const { merchantId, observer } = await fx.merchantWithObserver();
    await fx.settle(merchantId, observer);
    const member = await fx.createMember(merchantId, observer.key);
    const original = await fx.waitMember(member.id);
    const delivery = await fx.deliveryOf(merchantId, observer.key, original.payload.id, observer.id, (d) => d.status === 'Succeeded');
    const path = new URL(delivery.url).pathname;

    const first = await api.post(`/api/WebhookDeliveries/${delivery.id}/replay`, undefined, { token: observer.key });
    const second = await api.post(`/api/WebhookDeliveries/${delivery.id}/replay`, undefined, { token: observer.key });
    expect(first.status).toBe(202);
    expect(second.status).toBe(202);
    expect(first.body.attemptId).toMatch(/^[0-9a-f-]{36}$/);
    expect(second.body.attemptId).not.toBe(first.body.attemptId);

    const reqs = await receiver.waitFor(path, (r) => memberEvent(r, member.id).length >= 3).then((r) => memberEvent(r, member.id));
    expect(reqs.every((r) => r.verified)).toBe(true);
    expect(new Set(reqs.map((r) => r.headers['webhook-id']))).toEqual(new Set([delivery.eventId]));
    // Each attempt is signed over its own timestamp (the time of that attempt).
    const stamps = reqs.map((r) => Number(r.headers['webhook-timestamp']));
    expect(stamps[1]).toBeGreaterThanOrEqual(stamps[0]!);
    expect(stamps.every((t, i) => Math.abs(t * 1000 - reqs[i]!.receivedAt) < 5000)).toBe(true);

    const after = await fx.deliveryOf(merchantId, observer.key, delivery.eventId, observer.id, (d) => d.attempts.length === 3);
    expect(after.attempts.filter((a: any) => a.trigger === 'Manual').map((a: any) => a.id).sort()).toEqual([first.body.attemptId, second.body.attemptId].sort());
    expect(after.status).toBe('Succeeded');
  });

  it("hides another merchant's deliveries (404) and refuses naming another merchant (403)", async () => {
    const a = await fx.merchantWithObserver();
    const b = await fx.merchantWithObserver();
    await fx.settle(a.merchantId, a.observer);
    const member = await fx.createMember(a.merchantId, a.observer.key);
    const req = await fx.waitMember(member.id);
    const delivery = await fx.deliveryOf(a.merchantId, a.observer.key, req.payload.id, a.observer.id);

    expect((await api.get(`/api/WebhookDeliveries/${delivery.id}`, { token: b.observer.key })).status).toBe(404);
    expect((await api.post(`/api/WebhookDeliveries/${delivery.id}/replay`, undefined, { token: b.observer.key })).status).toBe(404);
    expect((await api.get(`/api/WebhookDeliveries?merchantId=${a.merchantId}`, { token: b.observer.key })).status).toBe(403);
    expect((await api.get(`/api/WebhookDeliveries/${randomUUID()}`, { token: a.observer.key })).status).toBe(404);
    expect((await api.get(`/api/WebhookDeliveries/${delivery.id}`, { token: platform.adminToken })).status).toBe(200);
  });

  it('filters the list by status and eventType and validates the query', async () => {
    const { merchantId, observer } = await fx.merchantWithObserver();
    await fx.settle(merchantId, observer);
    const member = await fx.createMember(merchantId, observer.key);
    const req = await fx.waitMember(member.id);
    await fx.deliveryOf(merchantId, observer.key, req.payload.id, observer.id, (d) => d.status === 'Succeeded');

    const ok = await api.get(`/api/WebhookDeliveries?merchantId=${merchantId}&status=Succeeded&eventType=member.created&pageSize=1`, { token: observer.key });
    expect(ok.status).toBe(200);
    expect(ok.body).toMatchObject({ page: 1, pageSize: 1, hasPreviousPage: false });
    expect(ok.body.items).toHaveLength(1);
    expect(ok.body.items[0]).toMatchObject({ status: 'Succeeded', eventType: 'member.created' });
    expect(ok.body.totalCount).toBeGreaterThanOrEqual(2);
    const none = await api.get(`/api/WebhookDeliveries?merchantId=${merchantId}&status=Failed`, { token: observer.key });
    expect(none.body.totalCount).toBe(0);
    const bad = await api.get(`/api/WebhookDeliveries?merchantId=${merchantId}&status=Bogus`, { token: observer.key });
    expect(bad.status).toBe(400);
    expect(bad.body.errors).toHaveProperty('status');
  });
});

/**
 * Regression: the webhooks service's copy of each key's endpoint followed identity's `api_key.*`
 * events only, which reach the bus through identity's outbox tens of milliseconds after the
 * change, so a replay or an event sent right after the gateway answered a revocation or a
 * webhook change used the old endpoint (probe: delivered to a revoked key 3 of 5 runs, to a
 * disabled one 2 of 5, a replay to the old URL 5 of 7). Now the gateway has the copy synced
 * before it answers. Each scenario runs several rounds, each on its own key, straight after the
 * answer, so the old lag would show.
 */
describe('webhook changes are in force when the gateway answers them', () => {
  const ROUNDS = 5;

  /** A merchant with ROUNDS keys, each live at its own path with one Succeeded delivery (of one member). */
  async function liveKeys() {
    const { merchantId, observer } = await fx.merchantWithObserver();
    const keys = [];
    for (let i = 0; i < ROUNDS; i++) {
      const key = await fx.createKey(merchantId);
      const path = `/sync-change/${randomUUID()}`;
      await fx.configure(merchantId, key, path, { webhookEvents: ['member.created'] });
      keys.push({ key, path });
    }
    await fx.settle(merchantId, observer);
    const member = await fx.createMember(merchantId, observer.key);
    const rounds = [];
    for (const { key, path } of keys) {
      const [req] = await receiver.waitFor(path, (r) => memberEvent(r, member.id).length > 0).then((r) => memberEvent(r, member.id));
      const delivery = await fx.deliveryOf(merchantId, observer.key, req!.payload.id, key.id, (d) => d.status === 'Succeeded');
      rounds.push({ key, path, delivery });
    }
    return { merchantId, observer, rounds };
  }

  /** Waits until every event raised so far has been taken off the bus, and then a little longer for attempts to land. */
  async function quiesce(merchantId: string, observer: { id: string; key: string; signingSecret: string }) {
    await fx.settle(merchantId, observer);
    await new Promise((r) => setTimeout(r, 1000));
  }

  it('revoke, then at once a replay and a new event: nothing reaches the revoked key', async () => {
    const { merchantId, observer, rounds } = await liveKeys();
    const answeredAt: number[] = [];
    for (const { key, delivery } of rounds) {
      expect((await api.del(`/api/ApiKeys/${key.id}`, { token: observer.key })).status).toBe(204);
      answeredAt.push(Date.now());
      const replay = await api.post(`/api/WebhookDeliveries/${delivery.id}/replay`, undefined, { token: observer.key });
      expect(replay.status, `replay after revoke: ${JSON.stringify(replay.body)}`).toBe(409);
      await fx.createMember(merchantId, observer.key);
    }
    await quiesce(merchantId, observer);
    // The replay, or an event raised after the revocation was answered (one raised before may still be in flight then).
    const late = rounds.map(({ path, delivery }, i) =>
      receiver.received(path).filter((r) => r.receivedAt >= answeredAt[i]! && (r.payload?.id === delivery.eventId || Date.parse(r.payload?.timestamp) >= answeredAt[i]!)).map((r) => r.payload?.type),
    );
    expect(late).toEqual(rounds.map(() => []));
  });

  it('URL change, then at once a replay: it goes to the new URL', async () => {
    const { merchantId, observer, rounds } = await liveKeys();
    for (const { key, path, delivery } of rounds) {
      const moved = `/sync-moved/${randomUUID()}`;
      await fx.configure(merchantId, key, moved, { webhookEvents: ['member.created'] });
      const replay = await api.post(`/api/WebhookDeliveries/${delivery.id}/replay`, undefined, { token: observer.key });
      expect(replay.status).toBe(202);
      const [req] = await receiver.waitFor(moved, (r) => r.some((x) => x.payload?.id === delivery.eventId));
      expect(req!.verified).toBe(true);
      const after = await fx.deliveryOf(merchantId, observer.key, delivery.eventId, key.id, (d) => d.attempts.some((a: any) => a.id === replay.body.attemptId));
      expect(after.url).toBe(receiver.url(moved));
      expect(receiver.received(path).filter((r) => r.payload?.id === delivery.eventId), 'the replay went to the old URL').toHaveLength(1);
    }
  });

  // Regression: a replay of a key whose webhook URL had been removed (webhookUrl null) answered
  // 202 and was sent to the delivery's last URL, one the merchant had taken away.
  it('URL removed, then a replay: 409, and nothing goes to the old URL', async () => {
    const { merchantId, observer, rounds } = await liveKeys();
    for (const { key, delivery } of rounds) {
      await fx.configure(merchantId, key, null);
      const replay = await api.post(`/api/WebhookDeliveries/${delivery.id}/replay`, undefined, { token: observer.key });
      expect(replay.status, `replay after the URL was removed: ${JSON.stringify(replay.body)}`).toBe(409);
    }
    await quiesce(merchantId, observer);
    const sent = rounds.map(({ path, delivery }) => receiver.received(path).filter((r) => r.payload?.id === delivery.eventId).length);
    expect(sent, 'attempts at the removed URL: only the original delivery').toEqual(rounds.map(() => 1));
  });

  it('disable, then at once a new event: it is not delivered', async () => {
    const { merchantId, observer, rounds } = await liveKeys();
    const answeredAt: number[] = [];
    for (const { key } of rounds) {
      const res = await api.put(`/api/ApiKeys/${key.id}/webhook`, { id: key.id, merchantId, webhookEnabled: false }, { token: key.key });
      expect(res.status).toBe(200);
      answeredAt.push(Date.now());
      await fx.createMember(merchantId, observer.key);
    }
    await quiesce(merchantId, observer);
    // An event raised after the change was answered: the one right after it, or any later one.
    const late = rounds.map(({ path }, i) => receiver.received(path).filter((r) => Date.parse(r.payload?.timestamp) >= answeredAt[i]!).map((r) => r.payload?.type));
    expect(late).toEqual(rounds.map(() => []));
    const listed = await api.get(`/api/WebhookDeliveries?merchantId=${merchantId}&pageSize=200`, { token: observer.key });
    const keyIds = new Set(rounds.map((r) => r.key.id));
    expect(listed.body.items.filter((d: any) => keyIds.has(d.apiKeyId) && d.status === 'Pending')).toEqual([]);
  });
});

/**
 * Regression: the copy of a key's endpoint applied the state an `api_key.*` event carried, by
 * version alone, so anything that could publish on NATS redirected a merchant's webhooks for
 * good with one forged `api_key.webhook_configured` (another URL, version + 1000; identity's later
 * changes had lower versions). NATS now requires the services' password; behind it, the webhooks
 * service applies the state identity has committed for the key, whatever the event says.
 */
describe('a forged api_key event on the bus', () => {
  it("does not move a key's webhooks, nor outlive the key's real changes", async () => {
    const { merchantId, observer } = await fx.merchantWithObserver();
    const key = await fx.createKey(merchantId);
    const path = `/forged-real/${randomUUID()}`;
    const attacker = `/forged-attacker/${randomUUID()}`;
    await fx.configure(merchantId, key, path);
    await fx.settle(merchantId, observer);

    // Published with the services' own credentials: what a client past NATS's authentication could send.
    const nc = await connect(natsServerOptions(platform.natsUrl));
    const forgedId = randomUUID();
    try {
      const forged = {
        id: forgedId,
        type: 'api_key.webhook_configured',
        version: 1,
        occurredAt: new Date().toISOString(),
        merchantId,
        data: { apiKeyId: key.id, merchantId, webhookUrl: receiver.url(attacker), webhookEvents: null, webhookEnabled: true, revoked: false, version: 1000 },
      };
      await jetstream(nc).publish(eventSubject(forged.type), JSON.stringify(forged), { msgID: forgedId });
    } finally {
      await nc.close();
    }
    const db = new pg.Client({ connectionString: platform.databaseUrl });
    await db.connect();
    try {
      const ingested = await eventually(async () => (await db.query(`select 1 from "webhooks"."events" where "id" = $1`, [forgedId])).rows.length > 0 || undefined, 20_000, 100);
      expect(ingested).toBe(true);
      const copy = await db.query(`select "url", "version" from "webhooks"."endpoints" where "api_key_id" = $1`, [key.id]);
      expect(copy.rows).toEqual([{ url: receiver.url(path), version: expect.any(Number) }]);
      expect(copy.rows[0].version).toBeLessThan(1000);
    } finally {
      await db.end();
    }

    const member = await fx.createMember(merchantId, key.key);
    const [req] = await receiver.waitFor(path, (r) => memberEvent(r, member.id).length > 0).then((r) => memberEvent(r, member.id));
    expect(req!.verified).toBe(true);
    // A real change still takes effect (the forged version did not outrank it).
    const moved = `/forged-moved/${randomUUID()}`;
    await fx.configure(merchantId, key, moved);
    const next = await fx.createMember(merchantId, key.key);
    await receiver.waitFor(moved, (r) => memberEvent(r, next.id).length > 0);
    expect(receiver.received(attacker)).toEqual([]);
  });
});
