import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startTestPlatform, type TestPlatform } from '../support/platform.js';
import { createHttpClient, type HttpClient } from '../support/http.js';

/**
 * Contract §2 (text policy), regression for: a NUL in any string answered 500 (Postgres refuses
 * it) and burned the Idempotency-Key; invalid UTF-8 was silently replaced with U+FFFD and stored.
 * The cases are generated from the gateway's route table (its OpenAPI document), so every write
 * route, including ones added later, is covered. A platform of its own, so the row counts that
 * show nothing was stored are not disturbed by other files.
 */
let platform: TestPlatform;
let http: HttpClient;
let db: pg.Client;

interface Operation {
  method: string;
  path: string;
  op: { requestBody?: { content: Record<string, { schema: Schema }> }; parameters?: { name: string; in: string }[]; 'x-auth': Record<string, unknown> };
}
type Schema = { $ref?: string; type?: string | string[]; properties?: Record<string, Schema>; anyOf?: Schema[]; items?: Schema };

let writeRoutes: Operation[] = [];
let queryRoutes: Operation[] = [];
let components: Record<string, Schema> = {};

const SOME_UUID = '00000000-0000-4000-8000-000000000001';
const concretePath = (path: string) => path.replace(/\{\w+\}/g, SOME_UUID);

function resolve(s: Schema | undefined): Schema | undefined {
  if (!s) return undefined;
  if (s.$ref) return resolve(components[s.$ref.split('/').pop()!]);
  return s;
}

function isString(s: Schema | undefined): boolean {
  const r = resolve(s);
  if (!r) return false;
  if (r.type === 'string' || (Array.isArray(r.type) && r.type.includes('string'))) return true;
  return (r.anyOf ?? []).some(isString);
}

/** The first string field the route's body schema declares, or undefined. */
function firstStringField(op: Operation): string | undefined {
  const schema = resolve(op.op.requestBody?.content['application/json']?.schema);
  for (const [name, prop] of Object.entries(schema?.properties ?? {})) if (isString(prop)) return name;
  return undefined;
}

async function rowCounts(): Promise<Record<string, number>> {
  const tables = await db.query<{ schemaname: string; relname: string }>(`select schemaname, relname from pg_stat_user_tables order by 1, 2`);
  const out: Record<string, number> = {};
  for (const t of tables.rows) {
    const r = await db.query<{ n: string }>(`select count(*) as n from ${db.escapeIdentifier(t.schemaname)}.${db.escapeIdentifier(t.relname)}`);
    out[`${t.schemaname}.${t.relname}`] = Number(r.rows[0].n);
  }
  return out;
}

beforeAll(async () => {
  platform = await startTestPlatform({ services: ['identity', 'billing', 'gateway'] });
  http = createHttpClient(platform.gatewayUrl!);
  db = new pg.Client({ connectionString: platform.databaseUrl });
  await db.connect();
  const doc = (await http('GET', '/openapi.json')).body;
  components = doc.components.schemas;
  for (const [path, ops] of Object.entries(doc.paths as Record<string, Record<string, Operation['op']>>)) {
    for (const [method, op] of Object.entries(ops)) {
      const operation = { method: method.toUpperCase(), path, op };
      if (['POST', 'PUT', 'PATCH', 'DELETE'].includes(operation.method)) writeRoutes.push(operation);
      if (op.parameters?.some((p) => p.in === 'query')) queryRoutes.push(operation);
    }
  }
}, 120_000);

afterAll(async () => {
  await db?.end();
  await platform?.stop();
});

describe('text the platform cannot store, on every route of the route table', () => {
  it('the route table has write routes to test', () => {
    expect(writeRoutes.length).toBeGreaterThan(20);
  });

  it('a NUL in any body string, at any depth, is 400 naming the field, and nothing is stored', async () => {
    const before = await rowCounts();
    const failures: string[] = [];
    for (const r of writeRoutes) {
      const field = firstStringField(r);
      const body: Record<string, unknown> = { probe: 'a\u0000b', nested: { items: [{ ok: 'fine', name: 'x\u0000' }] } };
      if (field) body[field] = `value\u0000${field}`;
      const res = await http(r.method, concretePath(r.path), { body, headers: { 'idempotency-key': `nul-${r.method}-${r.path}` } });
      const expected = ['probe', 'nested.items[0].name', ...(field ? [field] : [])];
      if (res.status !== 400 || !expected.every((f) => res.body?.errors?.[f]) || res.body?.errors?.['nested.items[0].ok'] || !res.body?.traceId) {
        failures.push(`${r.method} ${r.path}: ${res.status} ${JSON.stringify(res.body)}`);
      }
    }
    expect(failures).toEqual([]);
    expect(await rowCounts()).toEqual(before);
  });

  it('a body that is not valid UTF-8 is 400 naming the field, not stored with U+FFFD', async () => {
    const before = await rowCounts();
    const failures: string[] = [];
    for (const r of writeRoutes) {
      const field = firstStringField(r) ?? 'probe';
      // 0xFF never occurs in UTF-8; 0xC3 0x28 is a truncated two-byte sequence.
      const bytes = Buffer.concat([Buffer.from(`{"${field}":"bad `), Buffer.from([0xff, 0xc3, 0x28]), Buffer.from(`","other":"caf\u00e9 \ufffd ok"}`)]);
      const res = await http(r.method, concretePath(r.path), { body: new Uint8Array(bytes), headers: { 'content-type': 'application/json' } });
      if (res.status !== 400 || !res.body?.errors?.[field] || res.body?.errors?.other || !res.body?.traceId) failures.push(`${r.method} ${r.path}: ${res.status} ${JSON.stringify(res.body)}`);
    }
    expect(failures).toEqual([]);
    expect(await rowCounts()).toEqual(before);
  });

  it('a NUL or invalid UTF-8 in a query value is 400 naming the parameter', async () => {
    const failures: string[] = [];
    for (const r of [...writeRoutes, ...queryRoutes]) {
      for (const [value, what] of [['a%00b', 'NUL'], ['a%FFb', 'invalid UTF-8']]) {
        const res = await http(r.method, `${concretePath(r.path)}?probe=${value}`, r.method === 'GET' ? {} : { body: {} });
        if (res.status !== 400 || !res.body?.errors?.probe) failures.push(`${what} ${r.method} ${r.path}: ${res.status} ${JSON.stringify(res.body)}`);
      }
    }
    expect(failures).toEqual([]);
  });
});

describe('text is stored exactly as sent', () => {
  it('keeps surrounding whitespace and the exact Unicode form, and refuses whitespace-only required text', async () => {
    const admin = platform.adminToken;
    const merchant = await http('POST', '/api/admin/merchants', { token: admin, body: { name: 'Text Merchant', contactEmail: 'text@example.com' } });
    expect(merchant.status).toBe(201);
    // "é" decomposed (e + U+0301) must not be normalised to the composed form.
    const name = '  Caf\u0065\u0301 product \t';
    const created = await http('POST', '/api/Products', { token: admin, body: { merchantId: merchant.body.id, name } });
    expect(created.status).toBe(201);
    expect(created.body.name).toBe(name);
    expect((await http('GET', `/api/Products/${created.body.id}`, { token: admin })).body.name).toBe(name);

    const blank = await http('POST', '/api/Products', { token: admin, body: { merchantId: merchant.body.id, name: ' \t\n ' } });
    expect(blank.status).toBe(400);
    expect(blank.body.errors.name).toBeDefined();
  });
});

describe("a refused body is its Idempotency-Key's 4xx outcome (idempotency rules 4 and 6)", () => {
  let merchantId: string;
  let path: string;
  const valid = () => ({ merchantId, type: 'Card', brand: 'Visa', last4: '4242', expiryMonth: 12, expiryYear: 2040 });

  beforeAll(async () => {
    const admin = platform.adminToken;
    const merchant = await http('POST', '/api/admin/merchants', { token: admin, body: { name: 'Key Merchant', contactEmail: 'key@example.com' } });
    merchantId = merchant.body.id;
    const member = await http('POST', '/api/Members', { token: admin, body: { merchantId, email: 'member@example.com', firstName: 'A', lastName: 'B' } });
    expect(member.status).toBe(201);
    path = `/api/members/${member.body.id}/payment-methods`;
  });

  /** Each way a body is refused before its route runs, as sent and as answered. */
  const refusals = () => [
    { name: 'a NUL in a field', status: 400, send: { body: { ...valid(), brand: 'Vi\u0000sa' } }, field: 'brand' },
    { name: 'malformed JSON', status: 400, send: { body: '{"merchantId": ', headers: { 'content-type': 'application/json' } }, field: '$' },
    { name: 'bytes that are not UTF-8', status: 400, send: { body: new Uint8Array([0x7b, 0x22, 0x62, 0x72, 0x61, 0x6e, 0x64, 0x22, 0x3a, 0x22, 0xff, 0x22, 0x7d]), headers: { 'content-type': 'application/json' } }, field: 'brand' },
    { name: 'a body that is not JSON', status: 415, send: { body: JSON.stringify(valid()), headers: { 'content-type': 'text/plain' } } },
    { name: 'a body over the size limit', status: 413, send: { body: JSON.stringify({ ...valid(), pad: 'x'.repeat(1024 * 1024 + 10) }), headers: { 'content-type': 'application/json' } } },
  ];

  it('is refused again when repeated; the fixed request under the same key is 409, under a new key it runs', async () => {
    const outcomes: string[] = [];
    for (const r of refusals()) {
      const headers = { 'idempotency-key': `refused-${r.name}` };
      const first = await http('POST', path, { token: platform.adminToken, ...r.send, headers: { ...r.send.headers, ...headers } });
      const again = await http('POST', path, { token: platform.adminToken, ...r.send, headers: { ...r.send.headers, ...headers } });
      const fixed = await http('POST', path, { token: platform.adminToken, headers, body: valid() });
      outcomes.push(`${r.name}: ${first.status} ${again.status} ${fixed.status} ${String(fixed.body?.type).split('/').pop()}`);
      expect(first.body.traceId).toBeDefined();
      if (r.field) expect(first.body.errors?.[r.field], r.name).toBeDefined();
      expect(again.headers['idempotent-replayed']).toBeUndefined();
    }
    expect(outcomes).toEqual(refusals().map((r) => `${r.name}: ${r.status} ${r.status} 409 idempotency-key-reused`));
    const fresh = await http('POST', path, { token: platform.adminToken, headers: { 'idempotency-key': 'refused-then-new-key' }, body: valid() });
    expect(fresh.status).toBe(201);
  });

  it('without a credential that may call the route, the refusal is answered as before authentication and the key stays free', async () => {
    const headers = { 'idempotency-key': 'refused-without-credential' };
    for (const token of [undefined, 'sk_not-a-key']) {
      const refused = await http('POST', path, { token, headers, body: { ...valid(), brand: 'Vi\u0000sa' } });
      expect(refused.status).toBe(400);
      expect(refused.body.errors.brand).toBeDefined();
    }
    const accepted = await http('POST', path, { token: platform.adminToken, headers, body: valid() });
    expect(accepted.status).toBe(201);
  });
});
