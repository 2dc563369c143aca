import { randomUUID } from 'node:crypto';
import { context, propagation, ROOT_CONTEXT, trace, TraceFlags } from '@opentelemetry/api';
import { AsyncLocalStorageContextManager } from '@opentelemetry/context-async-hooks';
import { W3CTraceContextPropagator } from '@opentelemetry/core';
import pg from 'pg';
import { describe, expect, it } from 'vitest';
import { DomainError } from '@billing/contracts';
import { OutboxMessage, recordEvent } from '@billing/service-runtime';
import { useMigratedDatabase } from '../../../../tests/support/migrated-database.js';
import { openBillingDatabase } from '../app.js';
import { BillingConfig } from '../config.js';
import { Merchant } from '../merchants/merchant.js';
import { MIGRATIONS } from '../migrations/index.js';
import { CREATE_MEMBERS_SQL, memberCreation, toMemberEvent } from './create-member.js';
import { sequentialScansOfGenericPlan } from '../../../../tests/support/generic-plan.js';
import { Member } from './member.js';
import { membersGrpc } from './members-grpc.js';

// Create-member's hand-written SQL against a real Postgres: one member per email under
// concurrency, the rows and events it writes against what the ORM writes for the same create,
// and the errors it answers.

const { orm, url, rows } = useMigratedDatabase({
  open: (databaseUrl) => openBillingDatabase(BillingConfig.parse({ DATABASE_URL: databaseUrl, DB_POOL_MAX: '25' })),
  schema: 'billing',
  migrations: MIGRATIONS,
});

async function newMerchant() {
  const merchant = Merchant.create({ name: 'Gym', contactEmail: 'ops@gym.example' });
  await orm().em.fork().persistAndFlush(merchant);
  return { merchantId: merchant.id, scope: { kind: 'merchantId' as const, merchantId: merchant.id } };
}

describe('creating members', () => {
  it('makes one member of concurrent creates of one email from two creators (replicas), and one of each other email, each with one member.created', async () => {
    const { merchantId, scope } = await newMerchant();
    const replicas = [membersGrpc(orm()), membersGrpc(orm())];
    const creates = [
      ...Array.from({ length: 20 }, (_, i) => ({ email: i % 2 ? 'SAME@example.com' : 'same@example.com' })),
      ...Array.from({ length: 30 }, (_, i) => ({ email: `other-${i}@example.com` })),
    ];
    const answers = await Promise.all(creates.map(({ email }, i) => replicas[i % 2]!.CreateMember({ scope, email, firstName: 'A', lastName: 'B' })));
    const same = answers.slice(0, 20);
    expect(new Set(same.map((a) => a.member.id)).size).toBe(1);
    expect(same.filter((a) => a.created)).toHaveLength(1);
    expect(answers.slice(20).every((a) => a.created)).toBe(true);
    expect(await rows(`select id from billing.members where merchant_id = ?`, [merchantId])).toHaveLength(31);
    expect(await rows(`select id from billing.outbox where type = 'member.created' and merchant_id = ?`, [merchantId])).toHaveLength(31);
    // Found again case-insensitively, unchanged.
    const again = await replicas[0]!.CreateMember({ scope, email: 'Same@Example.com', firstName: 'C', lastName: 'D' });
    expect(again).toEqual({ member: same.find((a) => a.created)!.member, created: false });
  });

  it('writes every column of the row and of its outbox event as the ORM writes them for the same create, with the trace context of its own request', async () => {
    const { merchantId } = await newMerchant();
    const create = memberCreation(orm());
    const inTrace = <T>(traceId: string, fn: () => Promise<T>) => context.with(trace.setSpanContext(ROOT_CONTEXT, { traceId, spanId: 'a'.repeat(16), traceFlags: TraceFlags.SAMPLED }), fn);
    context.setGlobalContextManager(new AsyncLocalStorageContextManager().enable());
    propagation.setGlobalPropagator(new W3CTraceContextPropagator());
    try {
      for (const phone of ['+61 400 000 000', null]) {
        const input = { merchantId, email: `Row.${phone ? 'phone' : 'none'}@Example.com`, firstName: 'Ada', lastName: 'Lovelace', phone };
        // Two creates in one batch, each in its own trace.
        const [answer, neighbour] = await Promise.all([
          inTrace('1'.repeat(32), () => create(input)),
          inTrace('2'.repeat(32), () => create({ ...input, email: `n.${input.email}` })),
        ]);
        expect(answer.created && neighbour.created).toBe(true);
        // The same create through the ORM, as create-member wrote it before.
        const reference = Member.create({ ...input, email: `orm.${input.email}` });
        await inTrace('1'.repeat(32), async () => {
          const em = orm().em.fork();
          em.persist(reference);
          recordEvent(em, { type: 'member.created', merchantId, data: toMemberEvent(reference) });
          await em.flush();
        });

        const em = orm().em.fork();
        const written = await em.findOneOrFail(Member, { id: answer.member.id });
        const expected = await em.findOneOrFail(Member, { id: reference.id });
        expect(written.toMessage()).toEqual(answer.member);
        expect({ ...written }).toEqual({ ...expected, id: written.id, email: input.email, createdAt: written.createdAt, updatedAt: written.updatedAt });
        expect(written.updatedAt.getTime()).toBe(written.createdAt.getTime());
        const columns = async (id: string) => (await rows(`select to_jsonb(m) - 'id' - 'email' - 'created_at' - 'updated_at' as row from billing.members m where id = ?`, [id]))[0]!.row;
        expect(await columns(written.id)).toEqual(await columns(expected.id));

        const event = async (id: string) => {
          const [{ outbox_id }] = await rows(`select id as outbox_id from billing.outbox where type = 'member.created' and data->>'id' = ?`, [id]);
          return em.findOneOrFail(OutboxMessage, { id: outbox_id });
        };
        const [sqlEvent, ormEvent] = [await event(written.id), await event(expected.id)];
        expect(sqlEvent.data).toEqual(toMemberEvent(written));
        expect(ormEvent.data).toEqual(toMemberEvent(expected));
        expect(Object.keys(sqlEvent.data)).toEqual(Object.keys(ormEvent.data));
        expect({ ...sqlEvent }).toEqual({ ...ormEvent, id: sqlEvent.id, data: sqlEvent.data, occurredAt: sqlEvent.occurredAt });
        expect(sqlEvent.traceContext).toEqual({ traceparent: `00-${'1'.repeat(32)}-${'a'.repeat(16)}-01` });
        expect(Math.abs(sqlEvent.occurredAt.getTime() - written.createdAt.getTime())).toBeLessThan(1000);
        expect((await event(neighbour.member.id)).traceContext).toEqual({ traceparent: `00-${'2'.repeat(32)}-${'a'.repeat(16)}-01` });
      }
    } finally {
      context.disable();
      propagation.disable();
    }
  });

  it('answers merchant_not_found for a merchant that does not exist, while its batch neighbours commit', async () => {
    const { scope } = await newMerchant();
    const members = membersGrpc(orm());
    const outcomes = await Promise.allSettled([
      members.CreateMember({ scope, email: 'before@example.com', firstName: 'A', lastName: 'B' }),
      members.CreateMember({ scope: { kind: 'merchantId', merchantId: randomUUID() }, email: 'x@example.com', firstName: 'A', lastName: 'B' }),
      members.CreateMember({ scope, email: 'after@example.com', firstName: 'A', lastName: 'B' }),
    ]);
    expect(outcomes.map((o) => (o.status === 'rejected' ? (o.reason as DomainError).code : 'ok'))).toEqual(['ok', 'merchant_not_found', 'ok']);
  });

  it('answers a create that meets the email index (the winner had not committed when it looked) with the winner, created: false', async () => {
    const { merchantId, scope } = await newMerchant();
    const holder = new pg.Client({ connectionString: url() });
    await holder.connect();
    try {
      const winnerId = randomUUID();
      await holder.query('begin');
      await holder.query(
        `insert into billing.members (id, merchant_id, email, first_name, last_name, created_at, updated_at) values ($1, $2, 'held@example.com', 'W', 'I', now(), now())`,
        [winnerId, merchantId],
      );
      const loser = membersGrpc(orm()).CreateMember({ scope, email: 'HELD@example.com', firstName: 'L', lastName: 'O' });
      for (let i = 0; ; i++) {
        if ((await rows(`select 1 from pg_stat_activity where datname = current_database() and wait_event_type = 'Lock'`)).length > 0) break;
        if (i === 100) throw new Error('the create never waited');
        await new Promise((r) => setTimeout(r, 20));
      }
      await holder.query('commit');
      expect(await loser).toMatchObject({ created: false, member: { id: winnerId, email: 'held@example.com', firstName: 'W' } });
      expect(await rows(`select id from billing.outbox where type = 'member.created' and merchant_id = ?`, [merchantId])).toHaveLength(0);
    } finally {
      await holder.end();
    }
  });
});

describe('the statement on a table of many members', () => {
  // Some thousands: the size at which a join to the recordset scanned them in the generic plan.
  it('looks each email up on the unique index: its generic plan (the statement is named) scans no table, and it still finds a member in another case', async () => {
    const { merchantId } = await newMerchant();
    await rows(
      `insert into billing.members (id, merchant_id, email, first_name, last_name, created_at, updated_at)
       select gen_random_uuid(), ?, 'many' || g || '@example.com', 'A', 'B', now(), now() from generate_series(1, 3000) g`,
      [merchantId],
    );
    await rows('analyze billing.members');
    const creates = JSON.stringify([{ seq: 0, email_key: 'many7@example.com', id: randomUUID(), merchant_id: merchantId, email: 'Many7@example.com', first_name: 'A', last_name: 'B', phone: null, created_at: new Date().toISOString(), updated_at: new Date().toISOString() }]);
    expect(await sequentialScansOfGenericPlan(orm(), 'billing', CREATE_MEMBERS_SQL, [creates, '[]'])).toEqual([]);
    const create = memberCreation(orm());
    const answer = await create({ merchantId: merchantId, email: 'MANY7@example.com', firstName: 'Other', lastName: 'Name' });
    expect(answer.created).toBe(false);
    expect(answer.member.email).toBe('many7@example.com');
  }, 30_000);
});
