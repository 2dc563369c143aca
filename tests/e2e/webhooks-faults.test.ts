import { randomUUID } from 'node:crypto';
import { existsSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { apiClient, eventually, unique, type ApiClient } from '../support/fixtures.js';
import { startTestPlatform, type TestPlatform } from '../support/platform.js';
import { memberEvent, onlyFor, webhookFixtures, type TestKey } from '../support/webhook-fixtures.js';
import { startWebhookReceiver, type WebhookReceiver } from '../support/webhook-receiver.js';

/**
 * Nothing is lost when parts of the event backbone fail: NATS restarting mid-stream, the webhooks
 * service killed with SIGKILL mid-delivery, and a service killed between committing an event and
 * publishing it. Runs its own platform: it kills and restarts processes.
 */
let platform: TestPlatform;
let api: ApiClient;
let receiver: WebhookReceiver;
let fx: ReturnType<typeof webhookFixtures>;
let db: pg.Client;
const crashDir = mkdtempSync(join(tmpdir(), 'bp-relay-crash-'));
const crashFile = join(crashDir, 'crash-before-publish');
const identityCrashFile = join(crashDir, 'identity-crash-before-publish');

beforeAll(async () => {
  platform = await startTestPlatform({
    services: ['identity', 'billing', 'webhooks', 'gateway'],
    serviceEnv: {
      webhooks: {
        WEBHOOK_RETRY_SCHEDULE: '1,1,1,1,1,1',
        WEBHOOK_RETRY_JITTER: '0',
        WEBHOOK_POLL_MS: '100',
        WEBHOOK_TIMEOUT_MS: '2000',
        WEBHOOK_LEASE_MS: '4000',
        WEBHOOK_ACK_WAIT_MS: '3000',
        WEBHOOK_ENDPOINT_CONCURRENCY: '4',
      },
      billing: { OUTBOX_RELAY_CRASH_FILE: crashFile, OUTBOX_POLL_MS: '200' },
      identity: { OUTBOX_RELAY_CRASH_FILE: identityCrashFile, OUTBOX_POLL_MS: '200' },
    },
  });
  api = apiClient(platform.gatewayUrl!);
  receiver = await startWebhookReceiver();
  fx = webhookFixtures(api, receiver, platform.adminToken);
  db = new pg.Client({ connectionString: platform.databaseUrl });
  await db.connect();
}, 120_000);

afterAll(async () => {
  await db?.end();
  await receiver?.close();
  await platform?.stop();
  rmSync(crashDir, { recursive: true, force: true });
});

/** A merchant whose key receives every event at its own path, settled. */
async function endpoint(prefix: string) {
  const { merchantId, observer } = await fx.merchantWithObserver();
  const key: TestKey = await fx.createKey(merchantId);
  const path = `/${prefix}/${randomUUID()}`;
  await fx.configure(merchantId, key, path, { webhookEvents: ['member.created'] });
  await fx.settle(merchantId, observer);
  return { merchantId, key, path };
}

/** Kills the webhooks service and waits until it is gone. */
async function stopWebhooks() {
  expect(platform.processes.webhooks!.kill('SIGKILL')).toBe(true);
  const end = Date.now() + 10_000;
  while (platform.processes.webhooks!.running() && Date.now() < end) await new Promise((r) => setTimeout(r, 50));
  expect(platform.processes.webhooks!.running()).toBe(false);
}

/** Waits until each member's member.created reached `path` (verified), and its delivery is Succeeded. */
async function expectAllDelivered(ep: { merchantId: string; key: TestKey; path: string }, members: { id: string }[], timeoutMs = 60_000) {
  const reqs = await receiver.waitFor(ep.path, (r) => members.every((m) => memberEvent(r, m.id).length > 0), timeoutMs);
  for (const m of members) expect(memberEvent(reqs, m.id).every((r) => r.verified)).toBe(true);
  for (const m of members) {
    const eventId = memberEvent(reqs, m.id)[0]!.payload.id;
    const d = await fx.deliveryOf(ep.merchantId, ep.key.key, eventId, ep.key.id, (x) => x.status === 'Succeeded', timeoutMs);
    expect(d?.status).toBe('Succeeded');
  }
}

describe('event backbone faults', () => {
  it('delivers every event when NATS restarts mid-stream', async () => {
    const ep = await endpoint('nats-restart');
    const members: { id: string }[] = [];
    for (let i = 0; i < 10; i++) members.push(await fx.createMember(ep.merchantId, ep.key.key));
    await platform.nats!.restart();
    for (let i = 0; i < 10; i++) members.push(await fx.createMember(ep.merchantId, ep.key.key));
    await expectAllDelivered(ep, members);
  }, 120_000);

  it('delivers every event when NATS is down while events are committed', async () => {
    const ep = await endpoint('nats-down');
    await platform.nats!.kill();
    const members: { id: string }[] = [];
    try {
      for (let i = 0; i < 5; i++) members.push(await fx.createMember(ep.merchantId, ep.key.key));
    } finally {
      await platform.nats!.restart();
    }
    await expectAllDelivered(ep, members);
  }, 120_000);

  it('delivers every event when the webhooks service is killed with SIGKILL mid-delivery', async () => {
    const ep = await endpoint('webhooks-kill');
    // A slow receiver keeps requests in flight when the kill lands.
    receiver.respond(ep.path, () => ({ status: 200, delayMs: 300 }));
    const members: { id: string }[] = [];
    for (let i = 0; i < 15; i++) members.push(await fx.createMember(ep.merchantId, ep.key.key));
    await receiver.waitFor(ep.path, (r) => members.some((m) => memberEvent(r, m.id).length > 0));
    expect(platform.processes.webhooks!.kill('SIGKILL')).toBe(true);
    for (let i = 0; i < 5; i++) members.push(await fx.createMember(ep.merchantId, ep.key.key));
    await platform.processes.webhooks!.start();
    await expectAllDelivered(ep, members);
  }, 120_000);

  it('publishes an event committed by a service that was killed before publishing it, once the service is back', async () => {
    const ep = await endpoint('relay-crash');
    const email = `${unique('crash')}@example.com`;
    writeFileSync(crashFile, '');
    // The commit succeeds; the relay then finds the crash file and kills billing before publishing.
    await api.post('/api/Members', { merchantId: ep.merchantId, email, firstName: 'Grace', lastName: 'Hopper' }, { token: ep.key.key }).catch(() => undefined);
    const end = Date.now() + 20_000;
    while (platform.processes.billing!.running() && Date.now() < end) await new Promise((r) => setTimeout(r, 50));
    expect(platform.processes.billing!.running()).toBe(false);
    expect(existsSync(crashFile)).toBe(false);

    const row = await db.query(`select "published_at" from "billing"."outbox" where "type" = 'member.created' and "data"->>'email' = $1`, [email]);
    expect(row.rows).toHaveLength(1);
    expect(row.rows[0].published_at).toBeNull();
    expect(receiver.received(ep.path).some((r) => r.payload?.data?.email === email)).toBe(false);

    await platform.processes.billing!.start();
    const reqs = await receiver.waitFor(ep.path, (r) => r.some((x) => x.payload?.data?.email === email), 30_000);
    expect(reqs.filter((r) => r.payload?.data?.email === email).every((r) => r.verified)).toBe(true);
    const after = await db.query(`select "published_at" from "billing"."outbox" where "data"->>'email' = $1`, [email]);
    expect(after.rows[0].published_at).not.toBeNull();
  }, 120_000);

  it("delivers an event that reached the bus before the webhook change made just before it (identity's event held back by a crash)", async () => {
    // Regression: each service publishes from its own outbox, so billing's member.created can
    // reach the webhooks service before identity's api_key event of a webhook enabled a moment
    // earlier; the member's event then found no endpoint and was never delivered.
    const ep = await endpoint('before-change');
    const late = await fx.createKey(ep.merchantId);
    const latePath = `/late-endpoint/${randomUUID()}`;
    // The key's creation is published before the relay is told to crash.
    await eventually(async () => (await db.query(`select 1 from "identity"."outbox" where "published_at" is null`)).rows.length === 0 || undefined);
    // The gateway syncs the webhooks service's copy of the endpoint before answering a change,
    // which would bring it up to date before the member's event; with the webhooks service down
    // that sync fails (as it may in production), and only identity's event is left to bring it.
    await stopWebhooks();
    writeFileSync(identityCrashFile, '');
    // Identity commits the change, then its relay kills it before publishing the api_key event.
    await api
      .put(`/api/ApiKeys/${late.id}/webhook`, { id: late.id, merchantId: ep.merchantId, webhookUrl: receiver.url(latePath), webhookEvents: null, webhookEnabled: true }, { token: late.key })
      .catch(() => undefined);
    receiver.secret(latePath, late.signingSecret);
    const end = Date.now() + 20_000;
    while (platform.processes.identity!.running() && Date.now() < end) await new Promise((r) => setTimeout(r, 50));
    expect(platform.processes.identity!.running()).toBe(false);
    const change = await db.query(`select "published_at" from "identity"."outbox" where "type" like 'api_key.%' and "data"->>'apiKeyId' = $1 and "data"->>'webhookEnabled' = 'true'`, [late.id]);
    expect(change.rows).toEqual([{ published_at: null }]);

    // A member created after the change reaches the webhooks service first (the admin token needs
    // no identity) and finds no endpoint of the late key. Webhooks runs but is not healthy (nor
    // can it sign) until identity is back, so its inbox and deliveries are read directly.
    const member = await fx.createMember(ep.merchantId, platform.adminToken);
    const webhooksBack = platform.processes.webhooks!.start();
    const ingested = await eventually(
      async () => (await db.query(`select 1 from "webhooks"."events" where "type" = 'member.created' and ("body"::jsonb)->'data'->>'id' = $1`, [member.id])).rows.length > 0 || undefined,
      30_000,
      100,
    );
    expect(ingested).toBe(true);
    expect((await db.query(`select "id" from "webhooks"."deliveries" where "api_key_id" = $1`, [late.id])).rows).toEqual([]);

    await platform.processes.identity!.start();
    await webhooksBack;
    const reqs = await receiver.waitFor(latePath, (r) => memberEvent(r, member.id).length > 0, 30_000);
    expect(memberEvent(reqs, member.id).every((r) => r.verified)).toBe(true);
    // The gateway's channel to identity reconnects on its own backoff: the next tests need identity through it.
    const reachable = await eventually(async () => (await api.get(`/api/ApiKeys?merchantId=${ep.merchantId}`, { token: platform.adminToken })).status === 200 || undefined, 60_000, 250);
    expect(reachable).toBe(true);
  }, 120_000);

  it('answers a webhook change and a revocation made while the webhooks service is down; its copy catches up from the events', async () => {
    const ep = await endpoint('sync-down');
    const gone = await fx.createKey(ep.merchantId);
    const moved = `/sync-down-moved/${randomUUID()}`;
    await stopWebhooks();
    const res = await api.put(`/api/ApiKeys/${ep.key.id}/webhook`, { id: ep.key.id, merchantId: ep.merchantId, webhookUrl: receiver.url(moved) }, { token: ep.key.key });
    expect(res.status, JSON.stringify(res.body)).toBe(200);
    expect(res.body.webhookUrl).toBe(receiver.url(moved));
    receiver.secret(moved, ep.key.signingSecret);
    expect((await api.del(`/api/ApiKeys/${gone.id}`, { token: ep.key.key })).status).toBe(204);
    expect((await api.get(`/api/ApiKeys/${gone.id}`, { token: platform.adminToken })).body.revokedAt).not.toBeNull();

    await platform.processes.webhooks!.start();
    const member = await fx.createMember(ep.merchantId, ep.key.key);
    const reqs = await receiver.waitFor(moved, (r) => memberEvent(r, member.id).length > 0, 30_000);
    expect(memberEvent(reqs, member.id).every((r) => r.verified)).toBe(true);
    expect(memberEvent(receiver.received(ep.path), member.id)).toHaveLength(0);
  }, 120_000);

  it('holds at most WEBHOOK_ENDPOINT_CONCURRENCY requests open to a receiver that never answers, and keeps delivering to others', async () => {
    const stuck = await endpoint('stuck');
    const healthy = await endpoint('healthy');
    receiver.respond(stuck.path, () => ({ status: 200, delayMs: 60_000 }));
    const stuckMembers: { id: string }[] = [];
    for (let i = 0; i < 12; i++) stuckMembers.push(await fx.createMember(stuck.merchantId, stuck.key.key));
    await receiver.waitFor(stuck.path, (r) => stuckMembers.filter((m) => memberEvent(r, m.id).length > 0).length >= 4);
    const healthyMembers: { id: string }[] = [];
    for (let i = 0; i < 12; i++) healthyMembers.push(await fx.createMember(healthy.merchantId, healthy.key.key));
    await expectAllDelivered(healthy, healthyMembers);
    expect(receiver.maxOpen(stuck.path)).toBeLessThanOrEqual(4);
    const stuckDelivery = await fx.deliveryOf(stuck.merchantId, stuck.key.key, memberEvent(receiver.received(stuck.path), stuckMembers[0]!.id)[0]!.payload.id, stuck.key.id, (d) => d.attempts.length >= 1);
    expect(stuckDelivery.attempts[0]).toMatchObject({ statusCode: null, error: 'timeout' });
  }, 120_000);

  it('keeps retrying through a webhooks restart and finishes the schedule', async () => {
    const ep = await endpoint('retry-restart');
    const email = `${unique('retry')}@example.com`;
    receiver.respond(ep.path, onlyFor(email, (n) => (n <= 3 ? { status: 500 } : { status: 200 })));
    const member = await fx.createMember(ep.merchantId, ep.key.key, email);
    await receiver.waitFor(ep.path, (r) => memberEvent(r, member.id).length >= 1);
    await platform.processes.webhooks!.restart();
    const reqs = await receiver.waitFor(ep.path, (r) => memberEvent(r, member.id).some((x) => x.verified) && memberEvent(r, member.id).length >= 4, 30_000);
    const d = await fx.deliveryOf(ep.merchantId, ep.key.key, memberEvent(reqs, member.id)[0]!.payload.id, ep.key.id, (x) => x.status === 'Succeeded', 30_000);
    expect(d.attempts.map((a: any) => a.statusCode).slice(-1)).toEqual([200]);
    expect(d.attempts.filter((a: any) => a.statusCode === 500)).toHaveLength(3);
  }, 120_000);
});
