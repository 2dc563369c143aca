import { randomUUID } from 'node:crypto';
import { describe, expect, it } from 'vitest';
import { createLogger, openDatabase } from '@billing/service-runtime';
import { useMigratedDatabase } from '../../../../tests/support/migrated-database.js';
import { ENTITIES } from '../app.js';
import type { CheckoutBackends } from '../backends.js';
import { MIGRATIONS } from '../migrations/index.js';
import { FINISH_SESSION_SQL, SessionCompletion, TAKE_SESSION_SQL } from './complete-session.js';
import { sequentialScansOfGenericPlan } from '../../../../tests/support/generic-plan.js';

// Completions arriving together share their statements (the lease taken, the session completed
// with its event) against a real Postgres database of its own; identity and billing, which are
// the e2e tests' (tests/e2e/checkout*.test.ts), answer here with fresh ids and count their calls.

const { orm, rows } = useMigratedDatabase({
  open: (url) => openDatabase({ url, schema: 'checkout', entities: ENTITIES }),
  schema: 'checkout',
  migrations: MIGRATIONS,
});

function backends(opts: { holdEnrolments?: Promise<void> } = {}) {
  const calls = { enrolments: 0 };
  const fake = {
    customers: { EnsureCustomerAccount: async () => ({ id: randomUUID() }) },
    enrolments: {
      Enrol: async (req: { subscriptionId: string }) => {
        calls.enrolments++;
        await opts.holdEnrolments;
        return { member: { id: randomUUID() }, paymentMethod: { id: randomUUID() }, subscription: { id: req.subscriptionId } };
      },
    },
  };
  return { backends: fake as unknown as CheckoutBackends, calls };
}

const completionWith = (b: CheckoutBackends) => new SessionCompletion(orm(), b, { leaseSeconds: 30, logger: createLogger('checkout-test', 'silent') });

/** An open session of `merchantId` with the customer's details and a captured bank token. */
async function openSession(merchantId: string, opts: { captured?: boolean } = {}): Promise<{ id: string; token: string }> {
  const id = randomUUID();
  await rows(
    `insert into checkout.sessions (id, merchant_id, api_key_id, plan_id, nonce, link_hash, return_url, email, first_name, last_name, status, subscription_id, created_at, updated_at)
     values (?, ?, ?, ?, ?, ?, 'https://shop.example/thanks', ?, 'Bea', 'Buyer', 'Open', ?, now(), now())`,
    [id, merchantId, randomUUID(), randomUUID(), randomUUID(), 'a'.repeat(64), `${id}@example.com`, randomUUID()],
  );
  const token = `btok_${randomUUID()}`;
  if (opts.captured !== false) {
    await rows(`insert into checkout.bank_tokens (token, session_id, merchant_id, account_name, bsb, last4, created_at) values (?, ?, ?, 'Bea Buyer', '062-000', '5678', now())`, [token, id, merchantId]);
  }
  return { id, token };
}

const eventsOf = (sessionId: string) => rows<{ data: { sessionId: string; subscriptionId: string } }>(`select data from checkout.outbox where type = 'checkout.completed' and data->>'sessionId' = ?`, [sessionId]);

describe('SessionCompletion', () => {
  it('completes sessions arriving together, each with its own ids and one checkout.completed, and decides each apart', async () => {
    const merchantId = randomUUID();
    const { backends: b, calls } = backends();
    const completion = completionWith(b);
    const sessions = await Promise.all(Array.from({ length: 12 }, () => openSession(merchantId)));
    const uncaptured = await openSession(merchantId, { captured: false });
    const elsewhere = await openSession(randomUUID());
    const answers = await Promise.allSettled([
      ...sessions.map((s) => completion.complete(merchantId, s.id, s.token)),
      completion.complete(merchantId, uncaptured.id, uncaptured.token),
      // Another merchant's session, and a session with another session's token.
      completion.complete(merchantId, elsewhere.id, elsewhere.token),
      completion.complete(merchantId, uncaptured.id, sessions[0]!.token),
    ]);
    const values = answers.map((a) => (a.status === 'fulfilled' ? a.value : (a.reason as { code: string }).code));
    expect(values.slice(0, 12)).toEqual(sessions.map(() => ({ status: 'Completed', returnUrl: 'https://shop.example/thanks', failureKind: '' })));
    expect(values.slice(12)).toEqual([
      expect.objectContaining({ status: 'Failed', failureKind: 'invalid_token' }),
      'not_found',
      expect.objectContaining({ status: 'Failed', failureKind: 'invalid_token' }),
    ]);
    expect(calls.enrolments).toBe(12);
    for (const s of sessions) {
      const [session] = await rows<{ status: string; completion_lease_until: Date | null; subscription_id: string; member_id: string | null }>(
        `select status, completion_lease_until, subscription_id, member_id from checkout.sessions where id = ?`,
        [s.id],
      );
      expect(session).toMatchObject({ status: 'Completed', completion_lease_until: null });
      expect(session!.member_id).not.toBeNull();
      const events = await eventsOf(s.id);
      expect(events).toHaveLength(1);
      expect(events[0]!.data.subscriptionId).toBe(session!.subscription_id);
    }
    expect((await rows<{ status: string }>(`select status from checkout.sessions where id = ?`, [uncaptured.id]))[0]!.status).toBe('Open');
  });

  it('gives one session\'s lease to one of the attempts arriving together; the other answers Pending, and a repeat afterwards Completed', async () => {
    const merchantId = randomUUID();
    let release!: () => void;
    const { backends: b, calls } = backends({ holdEnrolments: new Promise<void>((r) => (release = r)) });
    const completion = completionWith(b);
    const s = await openSession(merchantId);
    // Two takes of one session never share a batch, but two batches may run at once: either
    // attempt may win the lease. The other answers at once; the winner waits in billing until released.
    const attempts = [completion.complete(merchantId, s.id, s.token), completion.complete(merchantId, s.id, s.token)];
    const loser = await Promise.race(attempts.map((a, n) => a.then(() => n)));
    expect(await attempts[loser]).toEqual({ status: 'Pending', failureKind: '' });
    release();
    expect(await attempts[1 - loser]!).toMatchObject({ status: 'Completed' });
    expect(await completion.complete(merchantId, s.id, s.token)).toMatchObject({ status: 'Completed' });
    expect(calls.enrolments).toBe(1);
    expect(await eventsOf(s.id)).toHaveLength(1);
  });
});

describe('the statements on tables of many sessions', () => {
  // Some thousands: the size at which a plan joining the recordset alone scanned them (with many
  // more rows the planner's estimate of an index lookup per row wins again).
  it('find their sessions and bank tokens by index: the generic plans (named statements keep them) scan no table', async () => {
    await rows(
      `insert into checkout.sessions (id, merchant_id, api_key_id, plan_id, nonce, link_hash, return_url, email, first_name, last_name, status, subscription_id, created_at, updated_at)
       select gen_random_uuid(), gen_random_uuid(), gen_random_uuid(), gen_random_uuid(), g::text, repeat('a', 64), 'https://shop.example/thanks', g || '@example.com', 'Bea', 'Buyer', 'Open', gen_random_uuid(), now(), now()
         from generate_series(1, 3000) g`,
    );
    await rows(
      `insert into checkout.bank_tokens (token, session_id, merchant_id, account_name, bsb, last4, created_at)
       select 'btok_' || s.id, s.id, s.merchant_id, 'Bea Buyer', '062-000', '5678', now() from checkout.sessions s where s.return_url = 'https://shop.example/thanks' and s.nonce ~ '^[0-9]+$'`,
    );
    await rows('analyze checkout.sessions');
    await rows('analyze checkout.bank_tokens');
    const [a, b] = [randomUUID(), randomUUID()];
    const takes = JSON.stringify([a, b].map((id, i) => ({ i, id, merchant_id: randomUUID(), token: `btok_${id}` })));
    expect(await sequentialScansOfGenericPlan(orm(), 'checkout', TAKE_SESSION_SQL, [takes, 30, `{btok_${a},btok_${b}}`, `{${a},${b}}`])).toEqual([]);
    const finishes = JSON.stringify([a, b].map((id) => ({ id, customer_account_id: randomUUID(), member_id: randomUUID(), payment_method_id: randomUUID(), completed_at: new Date().toISOString() })));
    expect(await sequentialScansOfGenericPlan(orm(), 'checkout', FINISH_SESSION_SQL, [finishes, '[]', `{${a},${b}}`])).toEqual([]);
  }, 30_000);
});
