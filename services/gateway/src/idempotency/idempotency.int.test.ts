import { randomUUID } from 'node:crypto';
import type { FastifyInstance } from 'fastify';
import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { z } from 'zod';
import { DomainError } from '@billing/contracts';
import { createLogger, openDatabase } from '@billing/service-runtime';
import { useMigratedDatabase } from '../../../../tests/support/migrated-database.js';
import { Authenticator } from '../auth/authenticator.js';
import type { Principal } from '../auth/principal.js';
import { created, defineRoute, noContent, type RouteResult } from '../http/route.js';
import { buildHttpServer } from '../http/server.js';
import { MIGRATIONS } from '../migrations/index.js';
import { startExpiryJob } from './expiry-job.js';
import { IdempotencyEngine } from './idempotency-engine.js';
import { IdempotencyRecord, IdempotencyRecordSchema } from './idempotency-record.js';
import { IdempotencyStore } from './idempotency-store.js';

// The engine against a real Postgres database of its own, driven through the gateway's HTTP
// server (fastify inject) with test routes whose outcomes the tests script.

const ADMIN_TOKEN = 'a'.repeat(40);
const AUTH = { authorization: `Bearer ${ADMIN_TOKEN}` };
const LEASE_MS = 30_000;
const RETENTION_MS = 24 * 3_600_000;

type Behaviour = 'created' | 'conflict' | 'unavailable' | 'crash' | 'gate';

const { orm } = useMigratedDatabase({
  open: (url) => openDatabase({ url, schema: 'gateway', entities: [IdempotencyRecordSchema] }),
  schema: 'gateway',
  migrations: MIGRATIONS,
});
let store: IdempotencyStore;
let now: Date;
let executions: number;
let script: Behaviour[];
let gates: { opened: Promise<void>; open(): void }[];

function gate() {
  let open!: () => void;
  const opened = new Promise<void>((r) => (open = r));
  return { opened, open };
}

const thingRoute = defineRoute({
  method: 'POST',
  url: '/api/Things',
  tag: 'Test',
  summary: 'Creates a thing',
  auth: { merchant: 'Staff' },
  body: z.object({ name: z.string().min(1) }),
  responses: { 201: null },
  idempotent: true,
  handler: async ({ body }): Promise<RouteResult> => {
    executions++;
    const behaviour = script.shift() ?? 'created';
    if (behaviour === 'gate') await gates.shift()!.opened;
    if (behaviour === 'conflict') throw new DomainError('subscription_exists', 'Exists.', { existingSubscriptionId: '11111111-1111-4111-8111-111111111111' });
    if (behaviour === 'unavailable') throw new DomainError('service_unavailable', 'Billing is down.');
    if (behaviour === 'crash') throw new Error('handler crashed');
    const id = randomUUID();
    return created({ id, name: body.name, amount: 19.95 }, `/api/Things/${id}`);
  },
});

const pauseRoute = defineRoute({
  method: 'POST',
  url: '/api/Things/:id/pause',
  tag: 'Test',
  summary: 'Pauses a thing',
  auth: { merchant: 'Staff' },
  params: z.object({ id: z.string() }),
  responses: { 204: null },
  idempotent: true,
  handler: async () => {
    executions++;
    return noContent();
  },
});

function engine(): IdempotencyEngine {
  return new IdempotencyEngine(store, createLogger('idempotency-test', 'silent'), { retentionMs: RETENTION_MS, leaseMs: LEASE_MS, clock: () => now });
}

/** A gateway HTTP server (as in app.ts) with its own engine over the shared store. */
async function server(): Promise<FastifyInstance> {
  const idempotency = engine();
  const { app, register } = buildHttpServer({
    logger: createLogger('idempotency-test', 'silent'),
    // Only the platform admin token is used here, which needs neither API keys nor JWTs.
    authenticator: new Authenticator(ADMIN_TOKEN, undefined as never, undefined as never, {}),
    pipeline: {
      runIdempotent: (_spec, request, principal, run) =>
        idempotency.run({ method: request.method, url: request.url, key: request.headers['idempotency-key'], rawBody: request.rawBody, principal, traceId: request.traceId }, run),
    },
  });
  register(thingRoute);
  register(pauseRoute);
  await app.ready();
  return app;
}

let app: FastifyInstance;

const post = (key: string | undefined, body: unknown, url = '/api/Things') =>
  app.inject({
    method: 'POST',
    url,
    headers: { ...AUTH, 'content-type': 'application/json', ...(key === undefined ? {} : { 'idempotency-key': key }) },
    payload: typeof body === 'string' ? body : JSON.stringify(body),
  });

const recordOf = (key: string, scope = 'admin') => orm().em.fork().findOne(IdempotencyRecord, { scope, key });

beforeAll(async () => {
  store = new IdempotencyStore(orm());
  app = await server();
});

afterAll(async () => {
  await app?.close();
});

beforeEach(() => {
  now = new Date();
  executions = 0;
  script = [];
  gates = [];
});

describe('Idempotency-Key header', () => {
  it('is required: 400 naming Idempotency-Key, and nothing runs', async () => {
    const res = await post(undefined, { name: 'a' });
    expect(res.statusCode).toBe(400);
    expect(res.headers['content-type']).toMatch(/^application\/problem\+json/);
    expect(res.json().errors).toHaveProperty('Idempotency-Key');
    expect(executions).toBe(0);
  });

  it('is checked before the body is validated', async () => {
    const res = await post(undefined, { name: '' });
    expect(res.json().errors).toEqual({ 'Idempotency-Key': [expect.any(String)] });
  });

  it('refuses an empty key and one over 255 characters; accepts 255', async () => {
    expect((await post('', { name: 'a' })).statusCode).toBe(400);
    expect((await post('k'.repeat(256), { name: 'a' })).statusCode).toBe(400);
    expect(executions).toBe(0);
    expect((await post(`${randomUUID()}`.padEnd(255, 'x'), { name: 'a' })).statusCode).toBe(201);
  });

  it('stores a key of 255 non-ASCII characters (its UTF-8 bytes, as Node hands them over) and replays it', async () => {
    const key = Buffer.from(`${randomUUID()}`.padEnd(255, 'é'), 'utf8').toString('latin1');
    const first = await post(key, { name: 'a' });
    expect(first.statusCode).toBe(201);
    const again = await post(key, { name: 'a' });
    expect([again.statusCode, again.headers['idempotent-replayed']]).toEqual([201, 'true']);
  });
});

describe('replay (rules 2 and 5)', () => {
  it('replays status, body and Location of a 201 without running again', async () => {
    const key = randomUUID();
    const first = await post(key, { name: 'a' });
    expect(first.statusCode).toBe(201);
    expect(first.headers['idempotent-replayed']).toBeUndefined();
    const again = await post(key, { name: 'a' });
    expect(again.statusCode).toBe(201);
    expect(again.body).toBe(first.body);
    expect(again.headers.location).toBe(first.headers.location);
    expect(again.headers['content-type']).toBe(first.headers['content-type']);
    expect(again.headers['idempotent-replayed']).toBe('true');
    expect(executions).toBe(1);
    expect(await recordOf(key)).toMatchObject({ state: 'completed', responseStatus: 201, responseBody: first.body });
  });

  it('replays a body with quotes, backslashes, newlines and non-ASCII text byte for byte', async () => {
    const key = randomUUID();
    const name = 'quote " backslash \\ slash / newline \n tab \t brace } é 日本 🎉 {"x":[1]}';
    const first = await post(key, { name });
    expect(first.statusCode).toBe(201);
    expect(first.json().name).toBe(name);
    const again = await post(key, { name });
    expect(again.headers['idempotent-replayed']).toBe('true');
    expect(again.body).toBe(first.body);
    expect(again.headers.location).toBe(first.headers.location);
    expect(executions).toBe(1);
    expect((await recordOf(key))!.responseHeaders).toEqual(expect.objectContaining({ location: first.headers.location }));
  });

  it('matches the path case-insensitively', async () => {
    const key = randomUUID();
    const first = await post(key, { name: 'a' }, '/api/Things');
    const again = await post(key, { name: 'a' }, '/API/things');
    expect(again.headers['idempotent-replayed']).toBe('true');
    expect(again.body).toBe(first.body);
    expect(executions).toBe(1);
  });

  it('replays a 204 without a body', async () => {
    const key = randomUUID();
    const id = randomUUID();
    const first = await app.inject({ method: 'POST', url: `/api/Things/${id}/pause`, headers: { ...AUTH, 'idempotency-key': key } });
    const again = await app.inject({ method: 'POST', url: `/api/Things/${id}/pause`, headers: { ...AUTH, 'idempotency-key': key } });
    expect([first.statusCode, again.statusCode]).toEqual([204, 204]);
    expect(again.body).toBe('');
    expect(again.headers['idempotent-replayed']).toBe('true');
    expect(executions).toBe(1);
  });

  it('replays after the gateway is rebuilt (state lives in Postgres)', async () => {
    const key = randomUUID();
    const first = await post(key, { name: 'a' });
    await app.close();
    app = await server();
    const again = await post(key, { name: 'a' });
    expect(again.statusCode).toBe(201);
    expect(again.body).toBe(first.body);
    expect(again.headers['idempotent-replayed']).toBe('true');
    expect(executions).toBe(1);
  });
});

describe('same key, different request (rule 4)', () => {
  it('is 409 idempotency_key_reused for a different body, path or method', async () => {
    const key = randomUUID();
    await post(key, { name: 'a' });
    const otherBody = await post(key, { name: 'b' });
    expect(otherBody.statusCode).toBe(409);
    expect(otherBody.json().type).toMatch(/idempotency-key-reused$/);
    const otherPath = await app.inject({ method: 'POST', url: `/api/Things/${randomUUID()}/pause`, headers: { ...AUTH, 'idempotency-key': key } });
    expect(otherPath.statusCode).toBe(409);
    expect(otherPath.json().type).toMatch(/idempotency-key-reused$/);
    expect(executions).toBe(1);
  });

  it('compares raw bytes: the same JSON spaced differently is a different request', async () => {
    const key = randomUUID();
    await post(key, '{"name":"a"}');
    expect((await post(key, '{ "name": "a" }')).statusCode).toBe(409);
  });
});

describe('while the original runs (rule 3)', () => {
  it('answers 409 idempotency_in_progress, then replays once it has finished', async () => {
    const key = randomUUID();
    const g = gate();
    gates.push(g);
    script.push('gate');
    const first = post(key, { name: 'a' });
    await waitFor(async () => (await recordOf(key))?.state === 'in_flight');
    const during = await post(key, { name: 'a' });
    expect(during.statusCode).toBe(409);
    expect(during.json().type).toMatch(/idempotency-in-progress$/);
    expect(during.json().detail).toMatch(/still in progress/);
    expect(during.headers['retry-after']).toBe('1');
    g.open();
    const original = await first;
    expect(original.statusCode).toBe(201);
    const after = await post(key, { name: 'a' });
    expect(after.body).toBe(original.body);
    expect(after.headers['idempotent-replayed']).toBe('true');
    expect(executions).toBe(1);
  });

  it('runs 20 concurrent identical requests once', async () => {
    const key = randomUUID();
    const results = await Promise.all(Array.from({ length: 20 }, () => post(key, { name: 'a' })));
    expect(executions).toBe(1);
    const originals = results.filter((r) => r.statusCode === 201 && !r.headers['idempotent-replayed']);
    expect(originals).toHaveLength(1);
    for (const r of results) {
      if (r.statusCode === 201) expect(r.json().id).toBe(originals[0].json().id);
      else expect(r.json().type).toMatch(/idempotency-in-progress$/);
    }
  });

  it('answers a claim left in flight past its lease (a crashed gateway) as outcome unknown', async () => {
    const key = randomUUID();
    const g = gate();
    gates.push(g);
    script.push('gate');
    const first = post(key, { name: 'a' });
    await waitFor(async () => (await recordOf(key))?.state === 'in_flight');
    now = new Date(now.getTime() + LEASE_MS);
    const after = await post(key, { name: 'a' });
    expect(after.statusCode).toBe(500);
    expect(after.headers['content-type']).toMatch(/^application\/problem\+json/);
    expect(after.headers['idempotent-replayed']).toBe('true');
    expect(after.json()).toMatchObject({ status: 500, type: expect.stringMatching(/idempotency-outcome-unknown$/), detail: expect.stringMatching(/outcome is unknown/) });
    expect(executions).toBe(1);
    // The presumed-dead claimer finishing after all records the real outcome.
    g.open();
    const late = await first;
    expect(late.statusCode).toBe(201);
    expect((await post(key, { name: 'a' })).body).toBe(late.body);
  });
});

describe('4xx outcomes release the key (rule 6, contract §10)', () => {
  it('runs the same request again after a 4xx', async () => {
    const key = randomUUID();
    script.push('conflict');
    const first = await post(key, { name: 'a' });
    expect(first.statusCode).toBe(409);
    expect(first.json().existingSubscriptionId).toBeDefined();
    expect(await recordOf(key)).toMatchObject({ state: 'released' });
    const again = await post(key, { name: 'a' });
    expect(again.statusCode).toBe(201);
    expect(again.headers['idempotent-replayed']).toBeUndefined();
    expect(executions).toBe(2);
  });

  it('still refuses a different body with the key after a 4xx', async () => {
    const key = randomUUID();
    script.push('conflict');
    await post(key, { name: 'a' });
    const other = await post(key, { name: 'b' });
    expect(other.statusCode).toBe(409);
    expect(other.json().type).toMatch(/idempotency-key-reused$/);
    expect(executions).toBe(1);
  });

  it('treats a body failing validation as a 4xx: the same body gets 400 again, a different one 409', async () => {
    const key = randomUUID();
    const invalid = await post(key, { name: '' });
    expect(invalid.statusCode).toBe(400);
    expect(invalid.json().errors).toHaveProperty('name');
    expect((await post(key, { name: '' })).statusCode).toBe(400);
    expect((await post(key, { name: 'fixed' })).statusCode).toBe(409);
    expect(executions).toBe(0);
  });
});

describe('5xx outcomes are stored, never re-run (rule 7)', () => {
  it.each([
    ['a 503 from a backend', 'unavailable' as const, 503],
    ['a crash of the handler', 'crash' as const, 500],
  ])('replays %s as problem+json with the original status and "outcome unknown"', async (_name, behaviour, status) => {
    const key = randomUUID();
    script.push(behaviour);
    const first = await post(key, { name: 'a' });
    expect(first.statusCode).toBe(status);
    const again = await post(key, { name: 'a' });
    expect(again.statusCode).toBe(status);
    expect(again.headers['content-type']).toMatch(/^application\/problem\+json/);
    expect(again.headers['idempotent-replayed']).toBe('true');
    expect(again.json()).toMatchObject({ status, type: expect.stringMatching(/idempotency-outcome-unknown$/), detail: expect.stringMatching(/outcome is unknown/) });
    expect(executions).toBe(1);
    expect(await recordOf(key)).toMatchObject({ state: 'completed', responseStatus: status });
  });
});

describe('scope and retention', () => {
  const principal = (merchantId: string): Principal => ({ kind: 'apiKey', apiKeyId: randomUUID(), merchantId });
  const request = (p: Principal, key: string) => ({ method: 'POST', url: '/api/Things', key, rawBody: Buffer.from('{}'), principal: p });
  const ok = async (): Promise<RouteResult> => {
    executions++;
    return { status: 201, body: { n: executions } };
  };

  it('scopes keys by merchant: the same key from two merchants runs for each', async () => {
    const e = engine();
    const key = randomUUID();
    const a = await e.run(request(principal(randomUUID()), key), ok);
    const b = await e.run(request(principal(randomUUID()), key), ok);
    expect([a.headers?.['idempotent-replayed'], b.headers?.['idempotent-replayed']]).toEqual([undefined, undefined]);
    expect(executions).toBe(2);
  });

  it('shares the scope between credentials of one merchant', async () => {
    const e = engine();
    const key = randomUUID();
    const merchant = randomUUID();
    await e.run(request(principal(merchant), key), ok);
    const replay = await e.run(request({ kind: 'merchantUser', userId: randomUUID(), merchantId: merchant, role: 'Owner' }, key), ok);
    expect(replay.headers?.['idempotent-replayed']).toBe('true');
    expect(executions).toBe(1);
  });

  it('frees a key after 24 hours, and the expiry job deletes expired records', async () => {
    const e = engine();
    const key = randomUUID();
    const merchant = randomUUID();
    await e.run(request(principal(merchant), key), ok);
    now = new Date(now.getTime() + RETENTION_MS);
    const reused = await e.run({ ...request(principal(merchant), key), rawBody: Buffer.from('{"other":true}') }, ok);
    expect(reused.headers?.['idempotent-replayed']).toBeUndefined();
    expect(executions).toBe(2);

    const stale = randomUUID();
    await e.run(request(principal(merchant), stale), ok);
    now = new Date(now.getTime() + RETENTION_MS);
    const job = startExpiryJob(store, createLogger('idempotency-test', 'silent'), 1000, () => now);
    try {
      await waitFor(async () => (await recordOf(stale, merchant)) === null, 10_000);
    } finally {
      await job.stop();
    }
    expect(await recordOf(stale, merchant)).toBeNull();
  });
});

describe('storage', () => {
  const blockOf = async (scope: string, key: string) => {
    const [row] = await orm().em.getConnection().execute<{ block: number }[]>(
      `select (ctid::text::point)[0]::int as block from idempotency_records where scope = ? and key = ?`,
      [scope, key],
    );
    return row!.block;
  };

  it('completes a record on the page of its claim, even where claims filled that page (fillfactor)', async () => {
    // The record completed is the first one on a page of its own: earlier tests' records may have
    // filled the table's last page up to its fillfactor, so claims are made until one opens a new
    // page. Then claims one after another until one lands on a page after it: that page then
    // holds as many claims as inserts may put on it. The completion, a response body of 700
    // bytes, must still fit beside them (an update in place, without new index entries).
    const scope = `storage-${randomUUID()}`;
    const claimOf = (key: string) => ({ scope, key, fingerprint: 'f'.repeat(64), method: 'POST', path: '/api/things', claimToken: randomUUID(), now, expiresAt: new Date(now.getTime() + RETENTION_MS) });
    const claimed = async () => {
      const c = claimOf(randomUUID());
      expect(await store.claim(c)).toBe(true);
      return { claim: c, page: await blockOf(scope, c.key) };
    };
    let previous = await claimed();
    let opening = await claimed();
    for (let n = 2; opening.page === previous.page; n++) {
      if (n > 400) throw new Error('400 claims stayed on one page');
      [previous, opening] = [opening, await claimed()];
    }
    const { claim: first, page } = opening;
    let claims = 1;
    for (;;) {
      const next = await claimed();
      claims++;
      if (next.page !== page) break;
      if (claims > 200) throw new Error('200 claims stayed on one page');
    }
    expect(claims).toBeGreaterThan(2);
    const body = JSON.stringify({ id: randomUUID(), note: 'x'.repeat(640) });
    expect(await store.complete(scope, first.key, first.claimToken, { status: 201, headers: { 'content-type': 'application/json' }, body }, now)).toBe(true);
    expect(await blockOf(scope, first.key)).toBe(page);
    expect((await store.find(scope, first.key))?.responseBody).toBe(body);
  });
});

async function waitFor(check: () => Promise<boolean>, timeoutMs = 5000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!(await check())) {
    if (Date.now() > deadline) throw new Error('condition not met in time');
    await new Promise((r) => setTimeout(r, 20));
  }
}
