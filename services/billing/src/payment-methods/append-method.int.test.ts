import { UniqueConstraintViolationException } from '@mikro-orm/postgresql';
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
import { membersGrpc } from '../members/members-grpc.js';
import { Merchant } from '../merchants/merchant.js';
import { MIGRATIONS } from '../migrations/index.js';
import type { PaymentProvider } from '../payment-provider/payment-provider.js';
import { PaymentProviders } from '../payment-provider/payment-providers.js';
import { methodAppender, TOKENS_SQL } from './append-method.js';
import { PaymentMethod, type InstrumentDetails } from './payment-method.js';
import { paymentMethodsGrpc } from './payment-methods-grpc.js';

// The append path's hand-written SQL against a real Postgres: ranks under concurrency, the rows
// and events it writes against what the ORM writes for the same add, and the provider-token rules.

const { orm, url, rows } = useMigratedDatabase({
  open: (databaseUrl) => openBillingDatabase(BillingConfig.parse({ DATABASE_URL: databaseUrl, DB_POOL_MAX: '25' })),
  schema: 'billing',
  migrations: MIGRATIONS,
});

const CARD: InstrumentDetails = { type: 'Card', brand: 'Visa', last4: '4242', expiryMonth: 12, expiryYear: 2040, accountName: null, bsb: null };
const BANK: InstrumentDetails = { type: 'BankAccount', brand: null, last4: '6789', expiryMonth: null, expiryYear: null, accountName: 'A Person', bsb: '062-000' };

/** A provider that knows every token as `CARD`. */
const providers = new PaymentProviders({ lookupToken: async (_account: string, token: string) => ({ token, ...CARD }) } as unknown as PaymentProvider);

async function merchantWithMembers(n: number) {
  const merchant = Merchant.create({ name: 'Gym', contactEmail: 'ops@gym.example' });
  await orm().em.fork().persistAndFlush(merchant);
  const scope = { kind: 'merchantId' as const, merchantId: merchant.id };
  const members = await Promise.all(Array.from({ length: n }, (_, i) => membersGrpc(orm()).CreateMember({ scope, email: `m${i}@example.com`, firstName: 'M', lastName: `${i}` })));
  return { merchantId: merchant.id, scope, memberIds: members.map((m) => m.member.id) };
}

describe('appending payment methods', () => {
  it.each([
    ['optimistically', undefined],
    ['under the member locks', 0],
    ['under the member locks after one lost attempt', 1],
  ])('gives concurrent adds distinct, dense ranks per member, across two appenders (replicas) whose batches race for the ranks (%s)', async (_mode, optimisticAttempts) => {
    const { scope, memberIds, merchantId } = await merchantWithMembers(3);
    const replicas = [0, 1].map(() => paymentMethodsGrpc(orm(), providers, methodAppender(orm(), { optimisticAttempts })));
    const adds = Array.from({ length: 60 }, (_, i) => ({ replica: replicas[i % 2]!, memberId: memberIds[i % 3]! }));
    const answers = await Promise.all(adds.map(({ replica, memberId }) => replica.AddPaymentMethod({ scope, memberId, ...CARD })));
    for (const memberId of memberIds) {
      const ranks = answers.filter((a) => a.paymentMethod.memberId === memberId).map((a) => a.paymentMethod.rank);
      expect(ranks.sort((x, y) => x - y)).toEqual(Array.from({ length: 20 }, (_, i) => i + 1));
      const stored = await rows(`select rank from billing.payment_methods where member_id = ? order by rank`, [memberId]);
      expect(stored.map((r) => r.rank)).toEqual(Array.from({ length: 20 }, (_, i) => i + 1));
    }
    expect(answers.every((a) => a.created && a.paymentMethod.isDefault === (a.paymentMethod.rank === 1))).toBe(true);
    expect(await rows(`select data->>'id' as id from billing.outbox where type = 'payment_method.added' and merchant_id = ?`, [merchantId])).toHaveLength(60);
    // A later add goes after the ones already stored.
    expect((await replicas[0]!.AddPaymentMethod({ scope, memberId: memberIds[0]!.toUpperCase(), ...BANK })).paymentMethod.rank).toBe(21);
  });

  it('writes every column of the row and of its outbox event as the ORM writes them for the same add, with the trace context of its own request', async () => {
    const { merchantId, memberIds } = await merchantWithMembers(3);
    const scope = { kind: 'merchant' as const, merchantId };
    const [viaSql, viaOrm, neighbourId] = memberIds as [string, string, string];
    const traceparent = (traceId: string) => `00-${traceId}-${'a'.repeat(16)}-01`;
    const inTrace = <T>(traceId: string, fn: () => Promise<T>) => context.with(trace.setSpanContext(ROOT_CONTEXT, { traceId, spanId: 'a'.repeat(16), traceFlags: TraceFlags.SAMPLED }), fn);
    context.setGlobalContextManager(new AsyncLocalStorageContextManager().enable());
    propagation.setGlobalPropagator(new W3CTraceContextPropagator());
    const append = methodAppender(orm());
    try {
      for (const [details, token] of [[CARD, 'tok_row_card'], [BANK, null]] as const) {
        // Two adds in one batch, each in its own trace.
        const [answer, neighbour] = await Promise.all([
          inTrace('1'.repeat(32), () => append({ scope, memberId: viaSql, details, providerToken: token })),
          inTrace('2'.repeat(32), () => append({ scope, memberId: neighbourId, details: CARD, providerToken: null })),
        ]);
        expect(answer.created && neighbour.created).toBe(true);
        // The same add through the ORM, as the append path wrote it before.
        const reference = PaymentMethod.create({ ...details, merchantId, memberId: viaOrm, rank: answer.paymentMethod.rank, providerToken: token && `${token}_orm` });
        await inTrace('1'.repeat(32), async () => {
          const em = orm().em.fork();
          em.persist(reference);
          recordEvent(em, { type: 'payment_method.added', merchantId, data: reference.toView() });
          await em.flush();
        });

        const em = orm().em.fork();
        const written = await em.findOneOrFail(PaymentMethod, { id: answer.paymentMethod.id });
        const expected = await em.findOneOrFail(PaymentMethod, { id: reference.id });
        expect(written.toMessage()).toEqual(answer.paymentMethod);
        expect({ ...written }).toEqual({ ...expected, id: written.id, memberId: viaSql, providerToken: token, createdAt: written.createdAt, updatedAt: written.updatedAt });
        expect(written.createdAt.getTime()).toBe(new Date(answer.paymentMethod.createdAt).getTime());
        expect(written.updatedAt.getTime()).toBe(written.createdAt.getTime());
        const columns = async (id: string) => (await rows(`select to_jsonb(pm) - 'id' - 'member_id' - 'provider_token' - 'created_at' - 'updated_at' as row from billing.payment_methods pm where id = ?`, [id]))[0]!.row;
        expect(await columns(written.id)).toEqual(await columns(expected.id));

        const event = async (id: string) => {
          const [{ outbox_id }] = await rows(`select id as outbox_id from billing.outbox where type = 'payment_method.added' and data->>'id' = ?`, [id]);
          return em.findOneOrFail(OutboxMessage, { id: outbox_id });
        };
        const [sqlEvent, ormEvent] = [await event(written.id), await event(expected.id)];
        expect(sqlEvent.data).toEqual(written.toView());
        expect(ormEvent.data).toEqual(expected.toView());
        expect({ ...sqlEvent }).toEqual({ ...ormEvent, id: sqlEvent.id, data: sqlEvent.data, occurredAt: sqlEvent.occurredAt });
        expect(sqlEvent.traceContext).toEqual({ traceparent: traceparent('1'.repeat(32)) });
        expect(Math.abs(sqlEvent.occurredAt.getTime() - written.createdAt.getTime())).toBeLessThan(1000);
        expect((await event(neighbour.paymentMethod.id)).traceContext).toEqual({ traceparent: traceparent('2'.repeat(32)) });
      }
    } finally {
      context.disable();
      propagation.disable();
    }
  });

  it.each([
    ['optimistically: its write loses the rank and it is decided again', undefined],
    ['under the member lock: it waits for the lock', 0],
  ])('takes the rank after one a concurrent add committed while it was deciding (%s)', async (_mode, optimisticAttempts) => {
    const { merchantId, memberIds } = await merchantWithMembers(2);
    const [memberId, neighbourId] = memberIds as [string, string];
    const holder = new pg.Client({ connectionString: url() });
    await holder.connect();
    try {
      // An add of rank 1 held uncommitted: an optimistic add reads no methods and takes rank 1 too.
      await holder.query('begin');
      await holder.query(
        `insert into billing.payment_methods (id, merchant_id, member_id, type, last4, rank, created_at, updated_at) values (gen_random_uuid(), $1, $2, 'Card', '1111', 1, now(), now())`,
        [merchantId, memberId],
      );
      const append = methodAppender(orm(), { optimisticAttempts });
      const scope = { kind: 'merchant' as const, merchantId };
      const [added, neighbour] = [append({ scope, memberId, details: CARD, providerToken: null }), append({ scope, memberId: neighbourId, details: CARD, providerToken: null })];
      for (let i = 0; i < 100 && (await rows(`select 1 from pg_stat_activity where datname = current_database() and wait_event_type = 'Lock'`)).length === 0; i++) {
        await new Promise((r) => setTimeout(r, 20));
      }
      await holder.query('commit');
      expect((await added).paymentMethod).toMatchObject({ rank: 2, last4: '4242' });
      expect((await neighbour).paymentMethod.rank).toBe(1);
      expect((await rows(`select rank, last4 from billing.payment_methods where member_id = ? order by rank`, [memberId])).map((r) => [r.rank, r.last4])).toEqual([[1, '1111'], [2, '4242']]);
      expect(await rows(`select data->>'rank' as rank from billing.outbox where type = 'payment_method.added' and merchant_id = ? and data->>'memberId' = ?`, [merchantId, memberId])).toEqual([{ rank: '2' }]);
    } finally {
      await holder.end();
    }
  });

  it('answers not_found for another merchant\'s, a missing or a malformed member, while its batch neighbours commit', async () => {
    const a = await merchantWithMembers(1);
    const b = await merchantWithMembers(1);
    const methods = paymentMethodsGrpc(orm(), providers);
    const outcomes = await Promise.allSettled([
      methods.AddPaymentMethod({ scope: b.scope, memberId: a.memberIds[0]!, ...CARD }),
      methods.AddPaymentMethod({ scope: a.scope, memberId: '00000000-0000-4000-8000-000000000000', ...CARD }),
      methods.AddPaymentMethod({ scope: a.scope, memberId: 'not-a-uuid', ...CARD }),
      methods.AddPaymentMethod({ scope: b.scope, memberId: b.memberIds[0]!, ...CARD }),
      methods.AddPaymentMethod({ scope: { kind: 'platform', platform: {} }, memberId: a.memberIds[0]!, ...CARD }),
    ]);
    expect(outcomes.map((o) => (o.status === 'rejected' ? (o.reason as DomainError).code : 'ok'))).toEqual(['not_found', 'not_found', 'not_found', 'ok', 'ok']);
    expect(await rows(`select id from billing.payment_methods where member_id = ?`, [a.memberIds[0]])).toHaveLength(1);
  });
});

describe('provider tokens', () => {
  const fromToken = (methods: ReturnType<typeof paymentMethodsGrpc>, scope: { kind: 'merchantId'; merchantId: string }, memberId: string, providerToken: string) =>
    methods.AddPaymentMethodFromToken({ scope, memberId, providerToken });

  it('answers the stored method for the same member (created: false), refuses another member\'s token, and lets another merchant use it', async () => {
    const { scope, memberIds } = await merchantWithMembers(2);
    const other = await merchantWithMembers(1);
    const methods = paymentMethodsGrpc(orm(), providers);
    const first = await fromToken(methods, scope, memberIds[0]!, 'tok_rules');
    expect(first).toMatchObject({ created: true, paymentMethod: { rank: 1, hasProviderToken: true } });
    const again = await fromToken(methods, scope, memberIds[0]!.toUpperCase(), 'tok_rules');
    expect(again).toEqual({ created: false, paymentMethod: first.paymentMethod });
    const taken = await fromToken(methods, scope, memberIds[1]!, 'tok_rules').catch((e: unknown) => e);
    expect(taken).toBeInstanceOf(DomainError);
    expect(taken).toMatchObject({ code: 'validation_failed', extensions: { errors: { providerToken: ['This token is already used by another member.'] } } });
    expect((await fromToken(methods, other.scope, other.memberIds[0]!, 'tok_rules')).created).toBe(true);
    expect(await rows(`select id from billing.payment_methods where provider_token = 'tok_rules'`)).toHaveLength(2);
    expect(await rows(`select id from billing.outbox where type = 'payment_method.added' and data->>'id' = ?`, [first.paymentMethod.id])).toHaveLength(1);
  });

  it('stores one row of concurrent adds of one token: the owner\'s adds all answer it, once created, the other member\'s are refused', async () => {
    const { scope, memberIds } = await merchantWithMembers(2);
    const replicas = [paymentMethodsGrpc(orm(), providers), paymentMethodsGrpc(orm(), providers)];
    const adds = Array.from({ length: 20 }, (_, i) => ({ replica: replicas[i % 2]!, memberId: memberIds[Math.floor(i / 2) % 2]! }));
    const outcomes = await Promise.allSettled(adds.map(({ replica, memberId }) => fromToken(replica, scope, memberId, 'tok_race')));
    const stored = await rows(`select id, member_id from billing.payment_methods where provider_token = 'tok_race'`);
    expect(stored).toHaveLength(1);
    const owner = stored[0]!.member_id as string;
    outcomes.forEach((o, i) => {
      if (adds[i]!.memberId === owner) expect(o.status === 'fulfilled' && o.value.paymentMethod.id).toBe(stored[0]!.id);
      else expect(o.status === 'rejected' && (o.reason as DomainError).extensions).toEqual({ errors: { providerToken: ['This token is already used by another member.'] } });
    });
    expect(outcomes.filter((o) => o.status === 'fulfilled' && o.value.created)).toHaveLength(1);
    expect(await rows(`select id from billing.outbox where type = 'payment_method.added' and data->>'id' = ?`, [stored[0]!.id])).toHaveLength(1);
  });

  it('answers each add of a batch mixing good and bad ones (members read together, with their merchants) as it answers alone', async () => {
    const a = await merchantWithMembers(4);
    const b = await merchantWithMembers(1);
    const live = await merchantWithMembers(1);
    const em = orm().em.fork();
    (await em.findOneOrFail(Merchant, { id: live.merchantId })).providerEnvironment = 'Production';
    await em.flush();
    // The provider knows a token on the account (merchant) it was made for only.
    const madeFor = new Map([['tok_a0', a.merchantId], ['tok_a1', a.merchantId], ['tok_a2', a.merchantId], ['tok_b', b.merchantId], ['tok_live', live.merchantId]]);
    const accountBound = new PaymentProviders({
      lookupToken: async (account: string, token: string) => (madeFor.get(token) === account ? { token, ...CARD } : null),
    } as unknown as PaymentProvider);
    const methods = paymentMethodsGrpc(orm(), accountBound);
    const platform = { kind: 'platform' as const, platform: {} };
    const adds = [
      () => fromToken(methods, a.scope, a.memberIds[0]!, ' tok_a0 '),
      () => methods.AddPaymentMethodFromToken({ scope: platform, memberId: a.memberIds[1]!.toUpperCase(), providerToken: 'tok_a1' }),
      () => fromToken(methods, a.scope, a.memberIds[2]!, 'tok_b'),
      () => fromToken(methods, a.scope, a.memberIds[3]!, 'tok_unknown'),
      () => fromToken(methods, a.scope, a.memberIds[3]!, '  '),
      () => fromToken(methods, b.scope, a.memberIds[2]!, 'tok_a2'),
      () => fromToken(methods, a.scope, '00000000-0000-4000-8000-000000000000', 'tok_a2'),
      () => fromToken(methods, a.scope, 'not-a-uuid', 'tok_a2'),
      () => fromToken(methods, live.scope, live.memberIds[0]!, 'tok_live'),
      () => fromToken(methods, b.scope, b.memberIds[0]!, 'tok_b'),
    ];
    const answerOf = (o: PromiseSettledResult<Awaited<ReturnType<typeof fromToken>>>) =>
      o.status === 'fulfilled'
        ? { created: o.value.created, memberId: o.value.paymentMethod.memberId }
        : { code: (o.reason as DomainError).code, message: (o.reason as DomainError).message, errors: (o.reason as DomainError).extensions?.errors };
    const answers = (await Promise.allSettled(adds.map((add) => add()))).map(answerOf);
    expect(answers).toEqual([
      { created: true, memberId: a.memberIds[0] },
      { created: true, memberId: a.memberIds[1] },
      { code: 'validation_failed', message: expect.any(String), errors: { providerToken: ['The payment provider does not know this token.'] } },
      { code: 'validation_failed', message: expect.any(String), errors: { providerToken: ['The payment provider does not know this token.'] } },
      { code: 'validation_failed', message: expect.any(String), errors: { providerToken: ['Required.'] } },
      { code: 'not_found', message: 'Member not found.', errors: undefined },
      { code: 'not_found', message: 'Member not found.', errors: undefined },
      { code: 'not_found', message: 'Not found.', errors: undefined },
      { code: 'provider_unavailable', message: 'No production payment provider is configured.', errors: undefined },
      { created: true, memberId: b.memberIds[0] },
    ]);
    const stored = await rows<{ member_id: string; provider_token: string }>(`select member_id, provider_token from billing.payment_methods where merchant_id = any(?::uuid[]) order by provider_token`, [`{${a.merchantId},${b.merchantId},${live.merchantId}}`]);
    expect(stored).toEqual([
      { member_id: a.memberIds[0], provider_token: 'tok_a0' },
      { member_id: a.memberIds[1], provider_token: 'tok_a1' },
      { member_id: b.memberIds[0], provider_token: 'tok_b' },
    ]);
    // Each refused add, made alone, is refused the same way.
    for (const i of [2, 3, 4, 5, 6, 7, 8]) expect(answerOf((await Promise.allSettled([adds[i]!()]))[0]!)).toEqual(answers[i]);
  });

  it('fails an add that meets the token index with the ORM\'s UniqueConstraintViolationException, which AddPaymentMethodFromToken answers by adding again', async () => {
    const { scope, merchantId, memberIds } = await merchantWithMembers(3);
    const holder = new pg.Client({ connectionString: url() });
    await holder.connect();
    try {
      // An uncommitted add of the token by the first member: the second's insert waits for it, then violates the index.
      const insertHeld = async (memberId: string, token: string, rank: number) => {
        await holder.query('begin');
        await holder.query(
          `insert into billing.payment_methods (id, merchant_id, member_id, type, last4, provider_token, rank, created_at, updated_at)
           values (gen_random_uuid(), $1, $2, 'Card', '4242', $3, $4, now(), now())`,
          [merchantId, memberId, token, rank],
        );
      };
      const waitForLock = async () => {
        for (let i = 0; i < 100; i++) {
          if ((await rows(`select 1 from pg_stat_activity where datname = current_database() and wait_event_type = 'Lock'`)).length > 0) return;
          await new Promise((r) => setTimeout(r, 20));
        }
        throw new Error('the add never waited');
      };

      await insertHeld(memberIds[0]!, 'tok_held', 1);
      const direct = methodAppender(orm())({ scope: { kind: 'merchant', merchantId }, memberId: memberIds[1]!, details: CARD, providerToken: 'tok_held' }).catch((e: unknown) => e);
      await waitForLock();
      await holder.query('commit');
      expect(await direct).toBeInstanceOf(UniqueConstraintViolationException);

      await insertHeld(memberIds[0]!, 'tok_held_2', 2);
      const viaGrpc = fromToken(paymentMethodsGrpc(orm(), providers), scope, memberIds[2]!, 'tok_held_2').catch((e: unknown) => e);
      await waitForLock();
      await holder.query('commit');
      expect(await viaGrpc).toMatchObject({ code: 'validation_failed', extensions: { errors: { providerToken: ['This token is already used by another member.'] } } });
      expect(await rows(`select id from billing.payment_methods where member_id = any(?::uuid[])`, [`{${memberIds[1]},${memberIds[2]}}`])).toHaveLength(0);
    } finally {
      await holder.end();
    }
  });
  it('looks the wanted tokens up by merchant and token on the index, even in a generic plan a connection made before the merchant had any token', async () => {
    const { merchantId, memberIds } = await merchantWithMembers(1);
    const client = new pg.Client({ connectionString: url() });
    await client.connect();
    try {
      await client.query('set search_path = billing');
      const insertMethods = (token: string, ranks: [number, number]) =>
        client.query(
          `insert into payment_methods (id, merchant_id, member_id, type, brand, last4, expiry_month, expiry_year, provider_token, rank, created_at, updated_at)
           select gen_random_uuid(), $1, $2, 'Card', 'Visa', '4242', 12, 2040, ${token}, i, now(), now() from generate_series($3::int, $4::int) i`,
          [merchantId, memberIds[0], ...ranks],
        );
      // The merchant's methods so far were added without a token.
      await insertMethods('null', [401, 1400]);
      await client.query('analyze payment_methods');
      await client.query('set plan_cache_mode = force_generic_plan');
      await client.query(`prepare tokens(uuid[], text[]) as ${TOKENS_SQL}`);
      const tokens = ['tok_a', 'tok_b', 'tok_c', 'tok_d', 'tok_400'];
      const execute = `execute tokens('{${tokens.map(() => merchantId).join(',')}}', '{${tokens.join(',')}}')`;
      // The plan is made (and kept) now, with no tokened method in the table.
      expect((await client.query(execute)).rows).toEqual([]);
      await insertMethods(`'tok_' || i`, [1, 400]);
      const [{ 'QUERY PLAN': [plan] }] = (await client.query(`explain (analyze, buffers, format json) ${execute}`)).rows;
      expect(plan.Plan['Actual Rows']).toBe(1);
      // A few index pages per token; a scan of the merchant's 400 tokened methods reads hundreds.
      expect(plan.Plan['Shared Hit Blocks'] + plan.Plan['Shared Read Blocks']).toBeLessThan(60);
    } finally {
      await client.end();
    }
  });
});
