import { randomUUID } from 'node:crypto';
import type { MikroORM } from '@mikro-orm/postgresql';
import { jetstream, jetstreamManager, type JsMsg } from '@nats-io/jetstream';
import { connect, type NatsConnection } from '@nats-io/transport-node';
import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { EVENTS_STREAM, EventEnvelope } from '@billing/contracts';
import { createTestDatabase, type TestDatabase } from '../../../tests/support/database.js';
import { startTestNats, type TestNats } from '../../../tests/support/nats.js';
import { openDatabase } from './database.js';
import { createLogger } from './logger.js';
import { natsServerOptions } from './nats.js';
import { OutboxRelay } from './outbox-relay.js';
import { OutboxMessageSchema, outboxTableSql, recordEvent } from './outbox.js';

const SCHEMA = 'relaytest';
const MERCHANT = '00000000-0000-4000-8000-000000000001';
const logger = createLogger('relay-test', process.env.TEST_LOG_LEVEL ?? 'silent');

let db: TestDatabase;
let nats: TestNats;
let orm: MikroORM;
let nc: NatsConnection;
const relays: OutboxRelay[] = [];

beforeAll(async () => {
  db = await createTestDatabase();
  nats = await startTestNats();
  orm = await openDatabase({ url: db.url, schema: SCHEMA, entities: [OutboxMessageSchema] });
  const conn = orm.em.getConnection();
  await conn.execute(`create schema "${SCHEMA}"`);
  for (const sql of outboxTableSql(SCHEMA)) await conn.execute(sql);
  nc = await connect({ ...natsServerOptions(nats.url), maxReconnectAttempts: -1, reconnectTimeWait: 100 });
}, 60_000);

afterAll(async () => {
  await Promise.all(relays.map((r) => r.stop()));
  await nc?.close();
  await orm?.close();
  await nats?.stop();
  await db?.drop();
});

beforeEach(async () => {
  await Promise.all(relays.splice(0).map((r) => r.stop()));
  await orm.em.getConnection().execute(`delete from "${SCHEMA}"."outbox"`);
  const jsm = await jetstreamManager(nc, { checkAPI: false });
  await jsm.streams.delete(EVENTS_STREAM).catch(() => undefined);
});

function startRelay(extra: Partial<ConstructorParameters<typeof OutboxRelay>[0]> = {}): OutboxRelay {
  const relay = new OutboxRelay({ orm, schema: SCHEMA, natsUrl: nats.url, logger, name: 'relay-test', pollIntervalMs: 60_000, ...extra }).start();
  relays.push(relay);
  return relay;
}

async function commitEvents(n: number, type = 'member.created'): Promise<string[]> {
  return orm.em.fork().transactional(async (em) => {
    const ids: string[] = [];
    for (let i = 0; i < n; i++) ids.push(recordEvent(em, { type, merchantId: MERCHANT, data: { seq: i } }).id);
    return ids;
  });
}

/** Every message in the stream, in stream order (waits until `expected` are there). */
async function streamMessages(expected: number, timeoutMs = 20_000): Promise<JsMsg[]> {
  const jsm = await jetstreamManager(nc, { checkAPI: false });
  const end = Date.now() + timeoutMs;
  for (;;) {
    // Right after a NATS restart JetStream may not answer yet: keep asking.
    const info = await jsm.streams.info(EVENTS_STREAM).catch(() => undefined);
    if (info && info.state.messages >= expected) break;
    if (Date.now() > end) throw new Error(`stream has ${info?.state.messages ?? 'no'} messages, expected ${expected}`);
    await new Promise((r) => setTimeout(r, 50));
  }
  const consumer = await jetstream(nc).consumers.get(EVENTS_STREAM);
  const out: JsMsg[] = [];
  while (out.length < expected) {
    const m = await consumer.next({ expires: 2000 });
    if (!m) break;
    out.push(m);
  }
  return out;
}

async function unpublishedCount(): Promise<number> {
  const [row] = await orm.em.getConnection().execute(`select count(*)::int as n from "${SCHEMA}"."outbox" where "published_at" is null`);
  return row.n;
}

describe('outbox relay', () => {
  it('publishes committed events in order, as the envelope on events.<type>, with Nats-Msg-Id and trace context', async () => {
    startRelay();
    const ids = await commitEvents(25);
    const msgs = await streamMessages(25);
    expect(msgs.map((m) => m.headers?.get('Nats-Msg-Id'))).toEqual(ids);
    const first = EventEnvelope.parse(msgs[0]!.json());
    expect(first).toMatchObject({ id: ids[0], type: 'member.created', merchantId: MERCHANT, data: { seq: 0 } });
    expect(msgs[0]!.subject).toBe('events.member.created');
    await expect.poll(unpublishedCount).toBe(0);
  });

  it('is woken by the commit notification, not by its poll', async () => {
    const relay = startRelay({ pollIntervalMs: 600_000 });
    await new Promise((r) => setTimeout(r, 300)); // the LISTEN connection is up
    await commitEvents(1);
    await streamMessages(1, 5_000);
    expect(relay.published).toBe(1);
  });

  it('publishes nothing for a rolled-back transaction', async () => {
    startRelay();
    await expect(
      orm.em.fork().transactional(async (em) => {
        recordEvent(em, { type: 'member.created', merchantId: MERCHANT, data: {} });
        throw new Error('rollback');
      }),
    ).rejects.toThrow('rollback');
    const ids = await commitEvents(1);
    const msgs = await streamMessages(1);
    expect(msgs.map((m) => m.headers?.get('Nats-Msg-Id'))).toEqual(ids);
    const info = await (await jetstreamManager(nc)).streams.info(EVENTS_STREAM);
    expect(info.state.messages).toBe(1);
  });

  it('creates the stream on file storage with a duplicate window, and a re-publish after a lost mark is dropped', async () => {
    startRelay();
    const ids = await commitEvents(3);
    await streamMessages(3);
    const info = await (await jetstreamManager(nc)).streams.info(EVENTS_STREAM);
    expect(info.config.storage).toBe('file');
    expect(info.config.duplicate_window).toBeGreaterThan(0);
    // As if the relay crashed after the publish acks but before its transaction committed.
    await orm.em.getConnection().execute(`update "${SCHEMA}"."outbox" set "published_at" = null`);
    relays[0]!.nudge();
    await expect.poll(unpublishedCount).toBe(0);
    const after = await (await jetstreamManager(nc)).streams.info(EVENTS_STREAM);
    expect(after.state.messages).toBe(3);
    expect(ids).toHaveLength(3);
  });

  it('keeps running while NATS is down and publishes everything once it is back', async () => {
    startRelay({ pollIntervalMs: 200, publishTimeoutMs: 1000 });
    const before = await commitEvents(5);
    await streamMessages(5);
    await nats.kill();
    const during = await commitEvents(10);
    await new Promise((r) => setTimeout(r, 1500));
    expect(await unpublishedCount()).toBe(10);
    await nats.restart();
    const after = await commitEvents(5);
    const msgs = await streamMessages(20, 30_000);
    expect(new Set(msgs.map((m) => m.headers?.get('Nats-Msg-Id')))).toEqual(new Set([...before, ...during, ...after]));
    await expect.poll(unpublishedCount).toBe(0);
  }, 60_000);

  it('starts while NATS is down without throwing, and publishes when it comes up', async () => {
    await nats.kill();
    let restarted = false;
    try {
      startRelay({ pollIntervalMs: 200, publishTimeoutMs: 1000 });
      const ids = await commitEvents(3);
      await new Promise((r) => setTimeout(r, 800));
      expect(await unpublishedCount()).toBe(3);
      await nats.restart();
      restarted = true;
      const msgs = await streamMessages(3, 30_000);
      expect(msgs.map((m) => m.headers?.get('Nats-Msg-Id'))).toEqual(ids);
    } finally {
      if (!restarted) await nats.restart();
    }
  }, 60_000);

  it('lets two replicas share one outbox: every event reaches the stream exactly once', async () => {
    startRelay({ batchSize: 20 });
    startRelay({ batchSize: 20 });
    const ids = (await Promise.all(Array.from({ length: 10 }, () => commitEvents(30)))).flat();
    const msgs = await streamMessages(300, 30_000);
    expect(msgs).toHaveLength(300);
    expect(new Set(msgs.map((m) => m.headers?.get('Nats-Msg-Id')))).toEqual(new Set(ids));
    await expect.poll(unpublishedCount).toBe(0);
  }, 60_000);

  it('prunes published rows older than the retention period and keeps unpublished ones', async () => {
    const relay = new OutboxRelay({ orm, schema: SCHEMA, natsUrl: nats.url, logger, name: 'relay-test', retentionMs: 60_000 });
    const conn = orm.em.getConnection();
    const [oldId, recentId, pendingId] = [randomUUID(), randomUUID(), randomUUID()];
    await conn.execute(
      `insert into "${SCHEMA}"."outbox" (id, type, merchant_id, data, occurred_at, published_at) values
        (?, 't', ?, '{}', now(), now() - interval '2 minutes'),
        (?, 't', ?, '{}', now(), now()),
        (?, 't', ?, '{}', now() - interval '1 day', null)`,
      [oldId, MERCHANT, recentId, MERCHANT, pendingId, MERCHANT],
    );
    expect(await relay.prune()).toBe(1);
    const rows = await conn.execute(`select id from "${SCHEMA}"."outbox" order by id`);
    expect(rows.map((r: { id: string }) => r.id).sort()).toEqual([recentId, pendingId].sort());
  });
});
