import { EntitySchema, UniqueConstraintViolationException, type EntityManager, type MikroORM } from '@mikro-orm/postgresql';
import { context, propagation, ROOT_CONTEXT, trace, TraceFlags } from '@opentelemetry/api';
import { AsyncLocalStorageContextManager } from '@opentelemetry/context-async-hooks';
import { W3CTraceContextPropagator } from '@opentelemetry/core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { DomainError } from '@billing/contracts';
import { createTestDatabase, type TestDatabase } from '../../../tests/support/database.js';
import { openDatabase } from './database.js';
import { GroupWrite } from './group-write.js';
import { OutboxMessageSchema, outboxTableSql, recordEvent } from './outbox.js';

const SCHEMA = 'groupwritetest';
const MERCHANT = '00000000-0000-4000-8000-000000000001';

class Tag {
  id!: string;
  name!: string;
}
const TagSchema = new EntitySchema<Tag>({ class: Tag, tableName: 'tags', properties: { id: { type: 'uuid', primary: true }, name: { type: 'string', unique: true } } });

let db: TestDatabase;
let orm: MikroORM;

beforeAll(async () => {
  db = await createTestDatabase();
  orm = await openDatabase({ url: db.url, schema: SCHEMA, entities: [OutboxMessageSchema, TagSchema] });
  const conn = orm.em.getConnection();
  await conn.execute(`create schema "${SCHEMA}"`);
  for (const sql of outboxTableSql(SCHEMA)) await conn.execute(sql);
  await conn.execute(`create table "${SCHEMA}"."tags" (id uuid primary key, name text not null unique)`);
}, 60_000);

afterAll(async () => {
  await orm?.close();
  await db?.drop();
});

let n = 0;
const uuid = () => `00000000-0000-4000-8000-${String(++n).padStart(12, '0')}`;

/** Creates a tag and its `tag.created` event; refuses names starting with "bad". */
function tagWriter(onBatch: (size: number) => void = () => {}) {
  return new GroupWrite<string, Tag>(orm, {
    load: async (_em, names) => onBatch(names.length),
    apply: (em: EntityManager, name: string) => {
      if (name.startsWith('bad')) throw DomainError.field('name', 'Refused.');
      const tag = Object.assign(new Tag(), { id: uuid(), name });
      em.persist(tag);
      recordEvent(em, { type: 'tag.created', merchantId: MERCHANT, data: { name } });
      return tag;
    },
  });
}

const rows = async (sql: string) => (await orm.em.getConnection().execute(sql)) as Record<string, unknown>[];

describe('GroupWrite', () => {
  it('commits concurrent items in one batch, each with its event', async () => {
    const sizes: number[] = [];
    const writer = tagWriter((s) => sizes.push(s));
    const tags = await Promise.all(Array.from({ length: 30 }, (_, i) => writer.run(`batch-${i}`)));
    expect(sizes).toEqual([30]);
    expect(new Set(tags.map((t) => t.id)).size).toBe(30);
    expect(await rows(`select name from "${SCHEMA}".tags where name like 'batch-%'`)).toHaveLength(30);
    expect(await rows(`select id from "${SCHEMA}".outbox where data->>'name' like 'batch-%'`)).toHaveLength(30);
  });

  it('fails only the item refused by a DomainError; its neighbours and their events commit', async () => {
    const writer = tagWriter();
    const outcomes = await Promise.allSettled(['ok-a', 'bad-b', 'ok-c'].map((name) => writer.run(name)));
    expect(outcomes.map((o) => o.status)).toEqual(['fulfilled', 'rejected', 'fulfilled']);
    expect((outcomes[1] as PromiseRejectedResult).reason).toBeInstanceOf(DomainError);
    expect(await rows(`select name from "${SCHEMA}".tags where name in ('ok-a', 'bad-b', 'ok-c') order by name`)).toEqual([{ name: 'ok-a' }, { name: 'ok-c' }]);
    expect(await rows(`select id from "${SCHEMA}".outbox where data->>'name' = 'bad-b'`)).toHaveLength(0);
  });

  it('runs the items of a batch the database refused one by one: only the violating one fails, and none of its event is written', async () => {
    const writer = tagWriter();
    await writer.run('taken');
    const outcomes = await Promise.allSettled(['fresh-1', 'taken', 'fresh-2'].map((name) => writer.run(name)));
    expect(outcomes.map((o) => o.status)).toEqual(['fulfilled', 'rejected', 'fulfilled']);
    expect((outcomes[1] as PromiseRejectedResult).reason).toBeInstanceOf(UniqueConstraintViolationException);
    expect(await rows(`select id from "${SCHEMA}".outbox where data->>'name' = 'taken'`)).toHaveLength(1);
    expect(await rows(`select id from "${SCHEMA}".outbox where data->>'name' like 'fresh-%'`)).toHaveLength(2);
  });

  it('writes each item\'s events with the trace context of its own request, not of the batch', async () => {
    context.setGlobalContextManager(new AsyncLocalStorageContextManager().enable());
    propagation.setGlobalPropagator(new W3CTraceContextPropagator());
    try {
      const writer = tagWriter();
      const traceIds = ['1'.repeat(32), '2'.repeat(32), '3'.repeat(32)];
      const inTrace = (traceId: string, fn: () => Promise<Tag>) =>
        context.with(trace.setSpanContext(ROOT_CONTEXT, { traceId, spanId: 'a'.repeat(16), traceFlags: TraceFlags.SAMPLED }), fn);
      await Promise.all(traceIds.map((id, i) => inTrace(id, () => writer.run(`traced-${i}`))));
      const events = await rows(`select data->>'name' as name, trace_context->>'traceparent' as traceparent from "${SCHEMA}".outbox where data->>'name' like 'traced-%' order by 1`);
      expect(events.map((e) => String(e.traceparent).split('-')[1])).toEqual(traceIds);
    } finally {
      context.disable();
      propagation.disable();
    }
  });

  it('never puts two items with one key in one batch', async () => {
    const sizes: number[] = [];
    const writer = new GroupWrite<string, string>(orm, { load: async (_em, items) => sizes.push(items.length), apply: (_em, item) => item }, { keyOf: (item) => item.slice(0, 1) });
    expect(await Promise.all(['a1', 'a2', 'b1', 'a3'].map((i) => writer.run(i)))).toEqual(['a1', 'a2', 'b1', 'a3']);
    expect(sizes.reduce((a, b) => a + b, 0)).toBe(4);
    expect(Math.max(...sizes)).toBeLessThanOrEqual(2);
  });
});
