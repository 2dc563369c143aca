import { randomUUID } from 'node:crypto';
import Ajv2020 from 'ajv/dist/2020.js';
import { afterAll, beforeAll, describe, expect, inject, it } from 'vitest';
import { CARD, createMember, idempotent, setUpMerchant, type TestMerchant } from '../support/billing-fixtures.js';
import { linkPayload, signLink } from '../support/checkout-fixtures.js';
import { adminToken } from '../support/e2e.js';
import { apiClient, createApiKey, createMerchant, createMerchantUser, eventually, unique } from '../support/fixtures.js';
import { PASSWORD } from '../support/onboarding-fixtures.js';
import { startWebhookReceiver, type WebhookReceiver } from '../support/webhook-receiver.js';

/**
 * What the gateway answers, checked against the OpenAPI document it serves, as a client generated
 * from that document meets it: for every call the status is one the operation declares, the
 * Content-Type one of that status's media types, the body valid against its schema (JSON Schema
 * 2020-12, as OpenAPI 3.1 says; no field the schema does not list), a 201 carries Location, a 429
 * Retry-After, and a Location, Retry-After or Idempotent-Replayed header sent is declared there;
 * a request the gateway accepted (2xx) is valid against the documented request body, and one it
accepted without a body is to an operation whose body the document says may be left out. The calls
 * cover every resource kind (every tag) and the error answers 400, 401, 403, 404, 409, 410,
 * 413, 415, 422 and 429. Regression for: 413 and 415 (a body over 1 MiB, a non-JSON
 * Content-Type) answered by every operation that may take a body, and declared by none.
 */
const gatewayUrl = inject('gatewayUrl');
const api = apiClient(gatewayUrl);
const admin = adminToken();
const ZERO = '00000000-0000-4000-8000-000000000000';
const DOC = 'https://billing.example/openapi.json';

let doc: any;
let ajv: InstanceType<typeof Ajv2020.default>;
let receiver: WebhookReceiver;
const failures: string[] = [];
/** `METHOD /template` → statuses seen. */
const seen = new Map<string, Set<number>>();

const esc = (s: string) => s.replace(/~/g, '~0').replace(/\//g, '~1');
const validators = new Map<string, ReturnType<typeof ajv.compile>>();
/** A validator for the schema at `pointer` in the document (its `$ref`s resolve in the document). */
function validatorOf(pointer: string) {
  let validate = validators.get(pointer);
  if (!validate) validators.set(pointer, (validate = ajv.compile({ $ref: `${DOC}#${pointer}` })));
  return validate;
}
const errorsOf = (validate: { errors?: any[] | null }) => (validate.errors ?? []).slice(0, 5).map((e) => `${e.instancePath || '/'} ${e.message}${e.params?.additionalProperty ? ` (${e.params.additionalProperty})` : ''}`).join('; ');

/** The document's path template for a concrete path (literal segments win over parameters). */
function templateOf(path: string): string | undefined {
  const hits = Object.keys(doc.paths).filter((t) => new RegExp(`^${t.replace(/\{[^}]+\}/g, '[^/]+')}$`, 'i').test(path));
  return hits.sort((a, b) => (a.match(/\{/g)?.length ?? 0) - (b.match(/\{/g)?.length ?? 0))[0];
}

/** Checks one answer against the operation's declared responses; every mismatch is a failure. */
function checkAnswer(method: string, path: string, requestBody: unknown, res: { status: number; headers: Headers; text: string }, sentBody: boolean): void {
  const template = templateOf(path.split('?')[0]!);
  const where = `${method} ${template ?? path} → ${res.status}`;
  const op = template && doc.paths[template][method.toLowerCase()];
  if (!op) return void failures.push(`${method} ${path}: no such operation in the document`);
  const key = `${method} ${template}`;
  (seen.get(key) ?? seen.set(key, new Set()).get(key)!).add(res.status);
  const declared = op.responses[String(res.status)];
  if (!declared) return void failures.push(`${where}: status not declared (declared: ${Object.keys(op.responses).join(', ')}): ${res.text.slice(0, 200)}`);
  const headers = Object.keys(declared.headers ?? {}).map((h) => h.toLowerCase());
  if (!headers.includes('x-trace-id') || !/^[0-9a-f]{32}$/.test(res.headers.get('x-trace-id') ?? '')) failures.push(`${where}: X-Trace-Id not declared or not 32 hex digits`);
  for (const h of ['location', 'retry-after', 'idempotent-replayed', 'www-authenticate']) {
    if (res.headers.get(h) !== null && !headers.includes(h)) failures.push(`${where}: header ${h} sent but not declared`);
  }
  if (res.status === 201 && !res.headers.get('location')) failures.push(`${where}: no Location`);
  if (res.status === 429 && !/^[1-9]\d*$/.test(res.headers.get('retry-after') ?? '')) failures.push(`${where}: no Retry-After`);
  if (res.headers.get('idempotent-replayed') !== null && res.headers.get('idempotent-replayed') !== 'true') failures.push(`${where}: Idempotent-Replayed is not "true"`);
  if (!declared.content) {
    if (res.text) failures.push(`${where}: a body where none is declared: ${res.text.slice(0, 200)}`);
    return;
  }
  const type = (res.headers.get('content-type') ?? '').split(';')[0]!.trim();
  if (!declared.content[type]) return void failures.push(`${where}: Content-Type ${type || '(none)'} not declared (${Object.keys(declared.content).join(', ')})`);
  let body: unknown;
  try {
    body = JSON.parse(res.text);
  } catch {
    return void failures.push(`${where}: body is not JSON: ${res.text.slice(0, 200)}`);
  }
  if (type === 'application/problem+json' && (body as { traceId?: string }).traceId !== res.headers.get('x-trace-id')) failures.push(`${where}: the problem's traceId is not the X-Trace-Id`);
  const validate = validatorOf(`/paths/${esc(template)}/${method.toLowerCase()}/responses/${res.status}/content/${esc(type)}/schema`);
  if (!validate(body)) failures.push(`${where}: body fails its schema: ${errorsOf(validate)} in ${res.text.slice(0, 300)}`);
  // A body refused for lacking fields (400 naming only body fields it did not send: "Required for a Card.", "Supply an email or a phone") is one the documented request
  // body refuses too: a client following the document is told which fields to send.
  const requestSchema0 = op.requestBody?.content['application/json'];
  const named = Object.keys((res.status === 400 && (body as { errors?: Record<string, string[]> }).errors) || {}).map((k) => k.split(/[.[]/)[0]!);
  const sent = requestBody !== null && typeof requestBody === 'object' && !Array.isArray(requestBody) ? (requestBody as Record<string, unknown>) : undefined;
  const ref = requestSchema0?.schema.$ref as string | undefined;
  const properties = Object.keys((ref ? doc.components.schemas[ref.split('/').at(-1)!] : requestSchema0?.schema)?.properties ?? {});
  if (requestSchema0 && sent && named.length && named.every((f) => properties.includes(f) && sent[f] == null)) {
    const validateRequest = validatorOf(`/paths/${esc(template)}/${method.toLowerCase()}/requestBody/content/application~1json/schema`);
    if (validateRequest(requestBody)) failures.push(`${where}: refused for lacking ${named.join(', ')}, but the request is valid against the documented request body`);
  }
  // A request the gateway accepted is one the document allows.
  if (res.status < 300 && !sentBody && op.requestBody?.required) failures.push(`${where}: accepted without a body, but the document requires one`);
  const requestSchema = op.requestBody?.content['application/json'];
  if (res.status < 300 && requestSchema && requestBody !== undefined) {
    const validateRequest = validatorOf(`/paths/${esc(template)}/${method.toLowerCase()}/requestBody/content/application~1json/schema`);
    if (!validateRequest(requestBody)) failures.push(`${where}: the request it accepted fails the documented request body: ${errorsOf(validateRequest)}`);
  }
}

interface CallOptions {
  token?: string;
  body?: unknown;
  /** Sent as it is, with `contentType` (default application/json). */
  raw?: string;
  contentType?: string;
  headers?: Record<string, string>;
}

/** One request through the gateway, its answer checked against the document. */
async function call(method: string, path: string, opts: CallOptions = {}): Promise<{ status: number; body: any; headers: Headers }> {
  const headers: Record<string, string> = { ...opts.headers };
  if (opts.token) headers.authorization = `Bearer ${opts.token}`;
  const payload = opts.raw ?? (opts.body === undefined ? undefined : JSON.stringify(opts.body));
  if (payload !== undefined) headers['content-type'] = opts.contentType ?? 'application/json';
  const res = await fetch(gatewayUrl + path, { method, headers, body: payload, redirect: 'manual' });
  const text = await res.text();
  checkAnswer(method, path, opts.body, { status: res.status, headers: res.headers, text }, payload !== undefined);
  let body: unknown;
  try {
    body = text ? JSON.parse(text) : undefined;
  } catch {
    body = text;
  }
  return { status: res.status, body, headers: res.headers };
}

/** A call whose status the test needs (to go on with what it created); the check above still runs. */
async function expectStatus(status: number, method: string, path: string, opts: CallOptions = {}) {
  const res = await call(method, path, opts);
  expect(res.status, `${method} ${path}: ${JSON.stringify(res.body)}`).toBe(status);
  return res;
}

function expectConforming() {
  const found = failures.splice(0);
  expect(found).toEqual([]);
}

beforeAll(async () => {
  const res = await fetch(`${gatewayUrl}/openapi.json`);
  expect(res.status).toBe(200);
  doc = await res.json();
  ajv = new Ajv2020.default({ strict: false, allErrors: true });
  // The formats the document uses (OpenAPI's int32 and double included), without a formats package.
  const uuid = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i;
  ajv.addFormat('uuid', uuid);
  ajv.addFormat('date-time', (s: string) => /^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(\.\d+)?(Z|[+-]\d\d:\d\d)$/.test(s) && !Number.isNaN(Date.parse(s)));
  ajv.addFormat('date', (s: string) => /^\d{4}-\d\d-\d\d$/.test(s) && !Number.isNaN(Date.parse(s)));
  ajv.addFormat('email', /^[^\s@]+@[^\s@]+$/);
  ajv.addFormat('uri', (s: string) => URL.canParse(s));
  ajv.addFormat('int32', { type: 'number', validate: (n: number) => Number.isInteger(n) && n >= -(2 ** 31) && n < 2 ** 31 });
  ajv.addFormat('double', { type: 'number', validate: (n: number) => Number.isFinite(n) });
  ajv.addSchema({ ...doc, $id: DOC });
  receiver = await startWebhookReceiver();
});

afterAll(async () => {
  await receiver?.close();
});

describe('the gateway answers what its OpenAPI document declares', () => {
  let m: TestMerchant & { keyId: string; signingSecret: string };
  let other: { id: string };
  let viewer: string;
  let owner: string;

  it('admin: merchants, gateway settings, API keys, merchant users and sign-in', async () => {
    const merchant = await expectStatus(201, 'POST', '/api/admin/merchants', { token: admin, body: { name: `Merchant ${unique()}`, contactEmail: `${unique('m')}@example.com`, country: 'AU' } });
    const id = merchant.body.id as string;
    other = await createMerchant(api, admin);
    await call('POST', '/api/admin/merchants', { token: admin, body: { name: '' } });
    await call('POST', '/api/admin/merchants', { body: { name: 'x', contactEmail: 'x@example.com' } });
    await call('POST', '/api/admin/merchants', { token: admin, raw: '{"name":' });
    expect((await call('POST', '/api/admin/merchants', { token: admin, raw: 'name=x', contentType: 'text/plain' })).status).toBe(415);
    expect((await call('POST', '/api/admin/merchants', { token: admin, raw: JSON.stringify({ name: 'x'.repeat(1_100_000) }) })).status).toBe(413);
    expect((await call('DELETE', `/api/ApiKeys/${ZERO}`, { token: admin, raw: 'x', contentType: 'text/plain' })).status).toBe(415);
    await call('GET', '/api/admin/merchants?pageSize=2', { token: admin });
    await call('GET', '/api/admin/merchants?page=0', { token: admin });
    await call('GET', `/api/admin/merchants/${id}`, { token: admin });
    await call('GET', `/api/admin/merchants/${ZERO}`, { token: admin });
    await call('GET', '/api/admin/merchants/not-a-uuid', { token: admin });
    await call('PATCH', `/api/admin/merchants/${id}`, { token: admin, body: { description: 'Gyms', billingRetryOffsetsDays: '1,2' } });
    await call('PATCH', `/api/admin/merchants/${id}`, { token: admin, body: { isActive: false } });
    await expectStatus(200, 'PUT', `/api/admin/merchants/${id}/provider`, { token: admin, body: { providerEnvironment: 'Staging', gatewayUsername: 'user', gatewayPassword: 'secret', merchantGuid: 'guid' } });
    await call('PUT', `/api/admin/merchants/${ZERO}/provider`, { token: admin, body: { providerEnvironment: 'Staging' } });

    const key = await expectStatus(201, 'POST', `/api/admin/merchants/${id}/api-keys`, { token: admin, body: { name: 'main' } });
    await call('POST', `/api/admin/merchants/${ZERO}/api-keys`, { token: admin, body: { name: 'x' } });
    const second = await expectStatus(201, 'POST', '/api/ApiKeys', { token: key.body.key, body: { merchantId: id, name: 'second', expiresAt: new Date(Date.now() + 86_400_000).toISOString() } });
    await call('POST', '/api/ApiKeys', { token: key.body.key, body: { merchantId: other.id, name: 'x' } });
    await call('GET', `/api/ApiKeys?merchantId=${id}`, { token: key.body.key });
    await call('GET', `/api/ApiKeys/${key.body.id}`, { token: key.body.key });
    await call('PUT', `/api/ApiKeys/${key.body.id}/webhook`, { token: key.body.key, body: { id: key.body.id, merchantId: id, webhookUrl: receiver.url('/all'), webhookEvents: null, webhookEnabled: true } });
    await call('PUT', `/api/ApiKeys/${key.body.id}/webhook`, { token: key.body.key, body: { id: key.body.id, merchantId: id, webhookEvents: ['no.such_event'] } });
    await call('PUT', `/api/ApiKeys/${ZERO}/webhook`, { token: key.body.key, body: { id: ZERO, merchantId: id, webhookEnabled: false } });
    await call('DELETE', `/api/ApiKeys/${second.body.id}`, { token: key.body.key });
    await call('GET', `/api/Members?merchantId=${id}`, { token: second.body.key });
    await call('GET', `/api/Members?merchantId=${id}`, { headers: { authorization: `bearer ${key.body.key}` } });

    const user = await expectStatus(201, 'POST', `/api/admin/merchants/${id}/users`, { token: admin, body: { email: `${unique('o')}@example.com`, password: 'correct-horse-1', fullName: 'Owner', role: 'Owner' } });
    await call('POST', `/api/admin/merchants/${id}/users`, { token: admin, body: { email: user.body.email, password: 'correct-horse-1', fullName: 'Again', role: 'Staff' } });
    await call('GET', `/api/admin/merchants/${id}/users`, { token: admin });
    await call('GET', `/api/admin/merchants/${id}/users/${user.body.id}`, { token: admin });
    const login = await expectStatus(200, 'POST', '/api/auth/login', { body: { email: user.body.email, password: 'correct-horse-1' } });
    owner = login.body.token;
    await call('PATCH', `/api/admin/merchants/${id}/users/${user.body.id}`, { token: owner, body: { isActive: false } });
    await call('POST', '/api/auth/login', { body: { email: user.body.email, password: 'wrong-horse-1' } });
    await call('GET', '/api/Merchants/me', { token: owner });
    await call('GET', '/api/Merchants/me', { token: admin });
    viewer = (await createMerchantUser(api, admin, id, 'Viewer')).token;
    await call('GET', `/api/admin/merchants/${id}/users`, { token: viewer });

    const product = await expectStatus(201, 'POST', '/api/Products', { token: key.body.key, body: { merchantId: id, name: 'Gym' } });
    const plan = await expectStatus(201, 'POST', '/api/Plans', { token: key.body.key, body: { merchantId: id, productId: product.body.id, name: 'Monthly', amount: 19.95, interval: 'Month' } });
    m = { id, key: key.body.key, keyId: key.body.id, signingSecret: key.body.signingSecret, productId: product.body.id, planId: plan.body.id };
    expectConforming();
  });

  it('catalogue: products, questions and plans', async () => {
    await call('POST', '/api/Products', { token: m.key, body: { merchantId: m.id, name: '' } });
    await call('POST', '/api/Products', { token: m.key, body: { merchantId: ZERO, name: 'x' } });
    await call('POST', '/api/Products', { token: viewer, body: { merchantId: m.id, name: 'x' } });
    await call('GET', `/api/Products?merchantId=${m.id}`, { token: m.key });
    await call('GET', `/api/Products/${m.productId}`, { token: m.key });
    await call('GET', `/api/Products/${ZERO}`, { token: m.key });
    const questions = `/api/Products/${m.productId}/questions`;
    const text = await expectStatus(201, 'POST', questions, { token: m.key, body: { merchantId: m.id, text: 'Why?', kind: 'Text', required: true } });
    await expectStatus(201, 'POST', questions, { token: m.key, body: { merchantId: m.id, text: 'Size', kind: 'SingleChoice', required: false, options: [{ label: 'S' }, { label: 'M' }] } });
    await call('POST', questions, { token: m.key, body: { merchantId: m.id, text: 'x', kind: 'Essay', required: true } });
    await call('POST', questions, { token: m.key, body: { merchantId: m.id, text: 'Colour', kind: 'MultiChoice', required: false } });
    await call('GET', questions, { token: m.key });
    await call('GET', `${questions}/${text.body.id}`, { token: m.key });
    await call('POST', `${questions}/reorder`, { token: m.key, body: { productId: m.productId, orders: [{ id: text.body.id, order: 5 }] } });
    await call('POST', `${questions}/reorder`, { token: m.key, body: { orders: [] } });
    await call('POST', `${questions}/reorder`, { token: m.key, body: { orders: [{ id: ZERO, order: 1 }] } });
    await call('POST', '/api/Plans', { token: m.key, body: { merchantId: m.id, productId: m.productId, name: 'Weekly', amount: 5, interval: 'Week', trialDays: 7, isActive: false } });
    await call('POST', '/api/Plans', { token: m.key, body: { merchantId: m.id, productId: ZERO, name: 'x', amount: 1, interval: 'Month' } });
    await call('POST', '/api/Plans', { token: m.key, body: { merchantId: m.id, productId: m.productId, name: 'x', amount: -1, interval: 'Month' } });
    await call('PATCH', `/api/Plans/${m.planId}`, { token: m.key, body: { name: 'Monthly plan' } });
    await call('PATCH', `/api/Plans/${m.planId}`, { token: m.key, body: { amount: 1 } });
    await call('GET', `/api/Plans?merchantId=${m.id}&isActive=true`, { token: m.key });
    await call('GET', `/api/Plans/${m.planId}`, { token: m.key });
    await call('GET', `/api/Plans?merchantId=${other.id}`, { token: m.key });
    expectConforming();
  });

  it('members, payment methods, subscriptions and their transitions, with Idempotency-Key replays', async () => {
    const member = await expectStatus(201, 'POST', '/api/Members', { token: m.key, body: { merchantId: m.id, email: `${unique('ada')}@example.com`, firstName: 'Ada', lastName: 'Lovelace', phone: '+61 400 000 000' } });
    await call('POST', '/api/Members', { token: m.key, body: { merchantId: m.id, email: member.body.email, firstName: 'Ada', lastName: 'Lovelace' } });
    await call('POST', '/api/Members', { token: m.key, body: { merchantId: other.id, email: `${unique('x')}@example.com`, firstName: 'A', lastName: 'B' } });
    await call('GET', `/api/Members?merchantId=${m.id}&email=${encodeURIComponent(member.body.email)}`, { token: m.key });
    await call('GET', `/api/Members/${member.body.id}`, { token: m.key });
    const methods = `/api/members/${member.body.id}/payment-methods`;
    const cardKey = randomUUID();
    const card = await expectStatus(201, 'POST', methods, { token: m.key, headers: idempotent(cardKey), body: { merchantId: m.id, ...CARD } });
    expect((await call('POST', methods, { token: m.key, headers: idempotent(cardKey), body: { merchantId: m.id, ...CARD } })).headers.get('idempotent-replayed')).toBe('true');
    await call('POST', methods, { token: m.key, headers: idempotent(cardKey), body: { merchantId: m.id, ...CARD, last4: '1111' } });
    await call('POST', methods, { token: m.key, body: { merchantId: m.id, ...CARD } });
    await call('POST', methods, { token: m.key, headers: idempotent(), raw: '{' });
    const bank = await expectStatus(201, 'POST', methods, { token: m.key, headers: idempotent(), body: { merchantId: m.id, type: 'BankAccount', accountName: 'Ada', bsb: '062-000', last4: '1234' } });
    // The fields a type requires (a Card's expiry, a BankAccount's name and BSB) are ones the document requires.
    expect((await call('POST', methods, { token: m.key, headers: idempotent(), body: { merchantId: m.id, type: 'Card', brand: 'Visa', last4: '4242' } })).status).toBe(400);
    expect((await call('POST', methods, { token: m.key, headers: idempotent(), body: { merchantId: m.id, type: 'BankAccount', last4: '1234' } })).status).toBe(400);
    await call('GET', methods, { token: m.key });
    await call('GET', `${methods}/${card.body.id}`, { token: m.key });
    await call('POST', `${methods}/reorder`, { token: m.key, body: { merchantId: m.id, orderedIds: [bank.body.id, card.body.id] } });
    await call('POST', `${methods}/reorder`, { token: m.key, body: { merchantId: m.id, orderedIds: [bank.body.id] } });
    await call('POST', `/api/members/${ZERO}/payment-methods/from-token`, { token: m.key, headers: idempotent(), body: { merchantId: m.id, providerToken: 'btok_unknown' } });

    const subKey = randomUUID();
    const sub = await expectStatus(201, 'POST', '/api/Subscriptions', { token: m.key, headers: idempotent(subKey), body: { merchantId: m.id, memberId: member.body.id, planId: m.planId, paymentMethodId: card.body.id } });
    await call('POST', '/api/Subscriptions', { token: m.key, headers: idempotent(subKey), body: { merchantId: m.id, memberId: member.body.id, planId: m.planId, paymentMethodId: card.body.id } });
    await call('POST', '/api/Subscriptions', { token: m.key, headers: idempotent(), body: { merchantId: m.id, memberId: member.body.id, planId: m.planId } });
    await call('POST', '/api/Subscriptions', { token: m.key, headers: idempotent(), body: { merchantId: m.id, memberId: ZERO, planId: m.planId } });
    await call('POST', '/api/Subscriptions', { token: m.key, headers: idempotent('k'.repeat(256)), body: { merchantId: m.id, memberId: member.body.id, planId: m.planId } });
    await call('POST', '/api/Subscriptions', { token: viewer, headers: idempotent(), body: { merchantId: m.id, memberId: member.body.id, planId: m.planId } });
    const inactive = await expectStatus(201, 'POST', '/api/Plans', { token: m.key, body: { merchantId: m.id, productId: m.productId, name: 'Old', amount: 9, interval: 'Month', isActive: false } });
    expect((await call('POST', '/api/Subscriptions', { token: m.key, headers: idempotent(), body: { merchantId: m.id, memberId: member.body.id, planId: inactive.body.id } })).status).toBe(422);
    await call('GET', `/api/Subscriptions?merchantId=${m.id}&memberId=${member.body.id}`, { token: m.key });
    await call('GET', `/api/Subscriptions?merchantId=${m.id}&status=Sleeping`, { token: m.key });
    await call('GET', `/api/Subscriptions/${sub.body.id}`, { token: m.key });
    const s = `/api/Subscriptions/${sub.body.id}`;
    await call('POST', `${s}/pause`, { token: m.key, headers: idempotent(), body: { resumeAt: new Date(Date.now() + 10 * 86_400_000).toISOString() } });
    await call('POST', `${s}/pause`, { token: m.key, headers: idempotent() });
    await call('POST', `${s}/resume`, { token: m.key, headers: idempotent() });
    await call('POST', `${s}/resume`, { token: m.key, headers: idempotent() });
    await call('POST', `${s}/cancel`, { token: m.key, headers: idempotent(), body: { atPeriodEnd: true } });
    await call('POST', `${s}/cancel`, { token: m.key, headers: idempotent() });
    await call('POST', `${s}/cancel`, { token: m.key, headers: idempotent() });
    await call('POST', `/api/Subscriptions/${ZERO}/pause`, { token: m.key, headers: idempotent() });
    expectConforming();
  });

  it('billing runs, transactions, retries, refunds and fee statements', async () => {
    const good = await createMember(api, m);
    await expectStatus(201, 'POST', `/api/members/${good.id}/payment-methods`, { token: m.key, headers: idempotent(), body: { merchantId: m.id, ...CARD } });
    await expectStatus(201, 'POST', '/api/Subscriptions', { token: m.key, headers: idempotent(), body: { merchantId: m.id, memberId: good.id, planId: m.planId } });
    const declined = await createMember(api, m);
    await expectStatus(201, 'POST', `/api/members/${declined.id}/payment-methods`, { token: m.key, headers: idempotent(), body: { merchantId: m.id, ...CARD, last4: '0002' } });
    await expectStatus(201, 'POST', '/api/Subscriptions', { token: m.key, headers: idempotent(), body: { merchantId: m.id, memberId: declined.id, planId: m.planId } });
    await expectStatus(200, 'POST', '/api/admin/billing-runs', { token: admin, body: {} });
    await call('POST', '/api/admin/billing-runs', { token: m.key, body: {} });
    const list = await expectStatus(200, 'GET', `/api/Transactions?merchantId=${m.id}`, { token: m.key });
    const settled = list.body.items.find((t: any) => t.status === 'Settled');
    const failed = list.body.items.find((t: any) => t.status === 'Failed');
    expect(settled && failed).toBeTruthy();
    await call('GET', `/api/Transactions/${settled.id}`, { token: m.key });
    await call('GET', `/api/Transactions?merchantId=${m.id}&status=Lost`, { token: m.key });
    await expectStatus(201, 'POST', `/api/Transactions/${settled.id}/refund`, { token: m.key, headers: idempotent(), body: { amount: 1, reason: 'goodwill' } });
    await call('POST', `/api/Transactions/${settled.id}/refund`, { token: m.key, headers: idempotent(), body: { amount: 1000 } });
    await call('POST', `/api/Transactions/${settled.id}/retry`, { token: m.key, headers: idempotent() });
    await expectStatus(201, 'POST', `/api/Transactions/${failed.id}/retry`, { token: m.key, headers: idempotent() });
    await call('POST', `/api/Transactions/${ZERO}/refund`, { token: m.key, headers: idempotent(), body: {} });

    const [periodStart, periodEnd] = [new Date(Date.now() - 86_400_000).toISOString(), new Date(Date.now() + 86_400_000).toISOString()];
    const statement = await expectStatus(201, 'POST', '/api/admin/fee-statements/generate', { token: admin, body: { merchantId: m.id, periodStart, periodEnd } });
    await call('POST', '/api/admin/fee-statements/generate', { token: admin, body: { merchantId: ZERO, periodStart, periodEnd } });
    await call('GET', `/api/admin/fee-statements?merchantId=${m.id}`, { token: admin });
    await call('POST', `/api/admin/fee-statements/${statement.body.id}/pay`, { token: admin, body: {} });
    await call('POST', `/api/admin/fee-statements/${statement.body.id}/finalise`, { token: admin });
    await call('POST', `/api/admin/fee-statements/${statement.body.id}/finalise`, { token: admin });
    await call('GET', `/api/FeeStatements?merchantId=${m.id}`, { token: m.key });
    await call('GET', `/api/FeeStatements/${statement.body.id}`, { token: m.key });
    await call('GET', `/api/FeeStatements/${statement.body.id}/lines?page=1&pageSize=10`, { token: m.key });
    await call('POST', `/api/admin/fee-statements/${statement.body.id}/pay`, { token: admin, body: { paymentReference: 'EFT-1', notes: 'Thanks' } });
    await call('POST', `/api/admin/fee-statements/${ZERO}/pay`, { token: admin, body: {} });
    expectConforming();
  });

  it('hosted checkout: links, resolve outcomes, session, bank capture and completion', async () => {
    const link = await expectStatus(201, 'POST', '/api/Checkout/links', { token: m.key, body: { merchantId: m.id, planId: m.planId, returnUrl: 'https://shop.example/thanks' } });
    await call('POST', '/api/Checkout/links', { token: m.key, body: { merchantId: m.id, planId: ZERO, returnUrl: 'https://shop.example/thanks' } });
    const resolved = await expectStatus(200, 'POST', '/api/Checkout/sessions/resolve', { body: { d: link.body.d, s: link.body.s } });
    await call('POST', '/api/Checkout/sessions/resolve', { body: { d: link.body.d, s: 'AAAA' } });
    await call('POST', '/api/Checkout/sessions/resolve', { body: { d: '', s: '' } });
    const session = { ...m, keyId: m.keyId, signingSecret: m.signingSecret };
    expect((await call('POST', '/api/Checkout/sessions/resolve', { body: signLink(m.signingSecret, linkPayload(session, { exp: 1000 })) })).status).toBe(410);
    await call('POST', '/api/Checkout/sessions/resolve', { body: signLink(m.signingSecret, linkPayload(session, { pid: ZERO })) });
    const once = linkPayload(session);
    await call('POST', '/api/Checkout/sessions/resolve', { body: signLink(m.signingSecret, once) });
    await call('POST', '/api/Checkout/sessions/resolve', { body: signLink(m.signingSecret, { ...once, returnUrl: 'https://shop.example/other' }) });
    const token = resolved.body.sessionToken;
    await call('GET', '/api/Checkout/sessions/me', { token });
    await call('GET', '/api/Checkout/sessions/me', { token: m.key });
    await call('PATCH', '/api/Checkout/sessions/me/customer', { token, body: { email: `${unique('buyer')}@example.com`, firstName: 'Grace', lastName: 'Hopper' } });
    await call('POST', '/api/Checkout/sessions/me/capture-bank', { token, body: { accountName: ' ', bsb: '1', accountNumber: '1' } });
    await call('POST', '/api/Checkout/sessions/me/capture-bank', { token, body: { sessionId: ZERO, accountName: 'Grace', bsb: '062-000', accountNumber: '12345678' } });
    const captured = await expectStatus(200, 'POST', '/api/Checkout/sessions/me/capture-bank', { token, body: { accountName: 'Grace', bsb: '062-000', accountNumber: '12345678' } });
    await call('POST', '/api/Checkout/sessions/me/complete', { token, body: { sessionId: resolved.body.sessionId, providerToken: 'btok_unknown' } });
    await call('POST', '/api/Checkout/sessions/me/complete', { token, body: { sessionId: resolved.body.sessionId } });
    await expectStatus(200, 'POST', '/api/Checkout/sessions/me/complete', { token, body: { sessionId: resolved.body.sessionId, providerToken: captured.body.providerToken } });
    await call('POST', '/api/Checkout/sessions/me/capture-bank', { token, body: { accountName: 'Grace', bsb: '062-000', accountNumber: '12345678' } });

    // A capture-bank token used by the merchant itself.
    const second = await expectStatus(200, 'POST', '/api/Checkout/sessions/resolve', { body: signLink(m.signingSecret, linkPayload(session)) });
    const free = await expectStatus(200, 'POST', '/api/Checkout/sessions/me/capture-bank', { token: second.body.sessionToken, body: { accountName: 'Grace', bsb: '062-000', accountNumber: '12345678' } });
    const member = await createMember(api, m);
    await expectStatus(201, 'POST', `/api/members/${member.id}/payment-methods/from-token`, { token: m.key, headers: idempotent(), body: { merchantId: m.id, providerToken: free.body.providerToken } });
    await call('POST', `/api/members/${member.id}/payment-methods/from-token`, { token: m.key, headers: idempotent(), body: { merchantId: m.id, providerToken: free.body.providerToken } });
    expectConforming();
  });

  it('customer accounts: sign-up, login, lockout (429), suspension (403), profile and password reset', async () => {
    const email = `${unique('cust')}@example.com`;
    const signup = await expectStatus(200, 'POST', '/api/account/signup', { body: { email, password: PASSWORD, firstName: 'Cu', lastName: 'Stomer', dateOfBirth: '1990-01-02', acceptedTerms: true } });
    await call('POST', '/api/account/signup', { body: { email, password: PASSWORD, firstName: 'Cu', lastName: 'Stomer', dateOfBirth: '1990-01-02' } });
    await call('POST', '/api/account/signup', { body: { email: 'not-an-email' } });
    await call('GET', '/api/account/me', { token: signup.body.token });
    await call('GET', '/api/account/me', { token: m.key });
    await call('PUT', '/api/account/profile', { token: signup.body.token, body: { firstName: 'Cus', lastName: 'Tomer', phone: '+61 400 000 001', city: 'Sydney' } });
    await call('PUT', '/api/account/profile', { token: signup.body.token, body: { accountId: ZERO, firstName: 'A', lastName: 'B' } });
    await call('POST', '/api/account/forgot-password', { body: { email } });
    const reset = await expectStatus(200, 'POST', `/api/admin/accounts/${signup.body.account.id}/password-reset`, { token: admin });
    await call('POST', `/api/admin/accounts/${ZERO}/password-reset`, { token: admin });
    await expectStatus(204, 'POST', '/api/account/reset-password', { body: { token: reset.body.token, newPassword: 'correct-horse-43' } });
    await call('POST', '/api/account/reset-password', { body: { token: reset.body.token, newPassword: 'correct-horse-44' } });
    await call('POST', '/api/account/verify-email', { body: { token: 'unknown' } });
    await expectStatus(204, 'POST', `/api/admin/accounts/${signup.body.account.id}/suspend`, { token: admin });
    expect((await call('POST', '/api/account/login', { body: { email, password: 'correct-horse-43' } })).status).toBe(403);
    await call('POST', `/api/admin/accounts/${signup.body.account.id}/unsuspend`, { token: admin });
    await expectStatus(200, 'POST', '/api/account/login', { body: { email, password: 'correct-horse-43' } });
    const statuses = [];
    for (let i = 0; i < 6; i++) statuses.push((await call('POST', '/api/account/login', { body: { email, password: 'wrong-horse-99' } })).status);
    expect(statuses.at(-1)).toBe(429);
    expectConforming();
  });

  it('invitations and onboarding, from the invitation to the completed wizard', async () => {
    const invited = await expectStatus(200, 'POST', '/api/Invitations', { token: m.key, body: { merchantId: m.id, firstName: 'In', lastName: 'Vitee', email: `${unique('inv')}@example.com`, expiresInDays: 7 } });
    await call('POST', '/api/Invitations', { token: m.key, body: { merchantId: m.id, firstName: 'In', lastName: 'Vitee' } });
    await call('POST', '/api/Invitations', { token: m.key, body: { merchantId: m.id, firstName: 'In', lastName: 'Vitee', phone: '+61 400 000 002' } });
    await call('POST', '/api/Invitations', { token: m.key, body: { merchantId: ZERO, firstName: 'In', lastName: 'Vitee', email: `${unique('inv')}@example.com` } });
    await call('POST', '/api/Invitations', { token: m.key, body: { merchantId: other.id, firstName: 'In', lastName: 'Vitee', email: `${unique('inv')}@example.com` } });
    await call('GET', `/api/Invitations?merchantId=${m.id}`, { token: m.key });
    const invitationId = invited.body.invitationId;
    await call('POST', '/api/onboard/preview', { body: { token: invited.body.token } });
    await call('POST', '/api/onboard/preview', { body: { token: 'unknown' } });
    const customer = await expectStatus(200, 'POST', '/api/account/signup', { body: { email: `${unique('c')}@example.com`, password: PASSWORD, firstName: 'In', lastName: 'Vitee', dateOfBirth: '1990-05-17' } });
    const token = customer.body.token;
    await expectStatus(200, 'POST', '/api/onboard/accept', { token, body: { token: invited.body.token } });
    await call('POST', '/api/onboard/accept', { token, body: { token: 'unknown' } });
    await call('POST', '/api/onboard/complete', { token, body: { invitationId } });
    await call('PATCH', '/api/onboard/details', { token, body: { invitationId, firstName: 'In', lastName: 'Vitee', phone: '+61 400 000 003', city: 'Sydney' } });
    await call('PATCH', '/api/onboard/details', { token, body: { invitationId, firstName: ' ' } });
    await call('POST', '/api/onboard/payment-method', { token, body: { invitationId, ...CARD } });
    await call('PATCH', '/api/onboard/plan', { token, body: { invitationId, planId: ZERO } });
    await call('PATCH', '/api/onboard/plan', { token, body: { invitationId, planId: m.planId } });
    const questions = (await call('GET', `/api/Products/${m.productId}/questions`, { token: m.key })).body as any[];
    const answers = questions.map((q) => (q.kind === 'Text' ? { questionId: q.id, textValue: 'Fitness' } : { questionId: q.id, optionIds: [q.options[0].id] }));
    await call('PATCH', '/api/onboard/answers', { token, body: { invitationId, answers } });
    await call('GET', `/api/onboard/${invitationId}`, { token });
    const done = await expectStatus(200, 'POST', '/api/onboard/complete', { token, body: { invitationId } });
    await call('GET', `/api/members/${done.body.memberId}/answers`, { token: m.key });
    await call('GET', `/api/members/${done.body.memberId}/answers?productId=nope`, { token: m.key });
    await call('GET', `/api/members/${ZERO}/answers`, { token: m.key });
    await call('PATCH', '/api/onboard/details', { token, body: { invitationId, firstName: 'In', lastName: 'Vitee' } });
    await call('GET', `/api/Invitations/${invitationId}`, { token: m.key });
    await call('DELETE', `/api/Invitations/${invitationId}`, { token: m.key });
    await call('DELETE', `/api/Invitations/${ZERO}`, { token: m.key });
    expectConforming();
  });

  it('webhook deliveries: list, read with attempts, replay', async () => {
    const list = await eventually(async () => {
      const res = await call('GET', `/api/WebhookDeliveries?merchantId=${m.id}&status=Succeeded`, { token: m.key });
      return res.body.items?.length ? res : undefined;
    }, 10_000);
    expect(list).toBeTruthy();
    const delivery = list!.body.items[0];
    await call('GET', `/api/WebhookDeliveries/${delivery.id}`, { token: m.key });
    await expectStatus(202, 'POST', `/api/WebhookDeliveries/${delivery.id}/replay`, { token: m.key });
    await call('POST', `/api/WebhookDeliveries/${delivery.id}/replay`, { token: viewer });
    await call('GET', `/api/WebhookDeliveries?merchantId=${m.id}&status=Lost`, { token: m.key });
    await call('GET', `/api/WebhookDeliveries/${ZERO}`, { token: m.key });
    expectConforming();
  });

  it('authentication: the public keys that verify the JWTs', async () => {
    const res = await expectStatus(200, 'GET', '/.well-known/jwks.json');
    expect((res.body as { keys: unknown[] }).keys.length).toBeGreaterThan(0);
    expectConforming();
  });

  it('covered every tag of the document and the error statuses', () => {
    const tagOf = new Map<string, string>();
    for (const [path, ops] of Object.entries<any>(doc.paths)) for (const [method, op] of Object.entries<any>(ops)) tagOf.set(`${method.toUpperCase()} ${path}`, op.tags[0]);
    const tags = new Set([...tagOf.values()]);
    const covered = new Set([...seen.keys()].map((k) => tagOf.get(k)));
    expect([...tags].filter((t) => !covered.has(t))).toEqual([]);
    const statuses = new Set([...seen.values()].flatMap((s) => [...s]));
    for (const status of [200, 201, 202, 204, 400, 401, 403, 404, 409, 410, 413, 415, 422, 429]) expect(statuses.has(status), String(status)).toBe(true);
    expect(seen.size).toBeGreaterThan(70);
  });
});

describe('the document states the types and limits of the interface', () => {
  /** Every schema object in the document, with where it is. */
  function* schemas(node: unknown, where = '#'): Generator<[string, Record<string, unknown>]> {
    if (!node || typeof node !== 'object') return;
    if (!Array.isArray(node) && typeof (node as any).type === 'string') yield [where, node as Record<string, unknown>];
    for (const [k, v] of Object.entries(node)) yield* schemas(v, `${where}/${k}`);
  }

  it('every integer is an int32 and every other number a double (a generated client must not read them as int64)', () => {
    const wrong = [...schemas({ components: doc.components, paths: doc.paths })]
      .filter(([, s]) => (s.type === 'integer' && s.format !== 'int32') || (s.type === 'number' && s.format !== 'double'))
      .map(([where]) => where);
    expect(wrong).toEqual([]);
  });

  it('declares Idempotent-Replayed only where a replay can answer: 2xx and 5xx (a 4xx releases its key and is never replayed)', () => {
    const declared: string[] = [];
    let replayable = 0;
    for (const [path, ops] of Object.entries<any>(doc.paths)) {
      for (const [method, op] of Object.entries<any>(ops)) {
        for (const [status, res] of Object.entries<any>(op?.responses ?? {})) {
          if (!res?.headers?.['Idempotent-Replayed']) continue;
          if (Number(status) >= 400 && Number(status) < 500) declared.push(`${method.toUpperCase()} ${path} → ${status}`);
          else replayable++;
        }
      }
    }
    expect(declared).toEqual([]);
    expect(replayable).toBeGreaterThan(0);
  });

  it('says every problem has a detail and a traceId (the answers above all did; the schema left both optional)', () => {
    expect(doc.components.schemas.ProblemDetails.required).toEqual(expect.arrayContaining(['type', 'title', 'status', 'detail', 'traceId']));
  });

  it('names the limits of the Limits table on the request bodies', () => {
    const body = (path: string, method: string) => {
      const s = doc.paths[path][method].requestBody.content['application/json'].schema;
      return s.$ref ? doc.components.schemas[s.$ref.split('/').at(-1)] : s;
    };
    const plain = (s: any) => s.anyOf?.find((x: any) => x.type !== 'null') ?? s;
    const limits = (path: string, method: string, field: string) => {
      const s = plain(body(path, method).properties[field]);
      return [s.minLength ?? s.minimum ?? s.minItems, s.maxLength ?? s.maximum ?? s.maxItems];
    };
    expect(limits('/api/Invitations', 'post', 'expiresInDays')).toEqual([1, 90]);
    expect(limits('/api/Invitations', 'post', 'firstName')).toEqual([1, 100]);
    expect(limits('/api/Invitations', 'post', 'lastName')).toEqual([1, 100]);
    expect(limits('/api/Invitations', 'post', 'email')[1]).toBe(256);
    expect(limits('/api/Invitations', 'post', 'phone')[1]).toBe(50);
    expect(limits('/api/ApiKeys/{id}/webhook', 'put', 'webhookUrl')[1]).toBe(2048);
    // accountName was "at most 200" only: its "at least 1" was a refinement the document could not show.
    expect(limits('/api/Checkout/sessions/me/capture-bank', 'post', 'accountName')).toEqual([1, 200]);
    expect(limits('/api/Checkout/sessions/me/capture-bank', 'post', 'bsb')).toEqual([1, 10]);
    expect(limits('/api/Checkout/sessions/me/capture-bank', 'post', 'accountNumber')).toEqual([1, 20]);
    expect(limits('/api/Checkout/sessions/resolve', 'post', 'd')[0]).toBe(1);
    expect(limits('/api/Checkout/sessions/resolve', 'post', 's')[0]).toBe(1);
    expect(limits('/api/auth/login', 'post', 'email')).toEqual([1, 256]);
    expect(limits('/api/auth/login', 'post', 'password')).toEqual([1, 128]);
    expect(limits('/api/Products/{productId}/questions/reorder', 'post', 'orders')[0]).toBe(1);
    expect(doc.components.parameters.IdempotencyKey.schema.maxLength).toBe(255);
    // The pay body's statementId is a uuid (ignored: the path names the statement).
    expect(plain(body('/api/admin/fee-statements/{statementId}/pay', 'post').properties.statementId).format).toBe('uuid');
    // Positive amounts are a refinement the schema cannot carry: the descriptions say it.
    expect(body('/api/Plans', 'post').properties.amount.description).toMatch(/greater than zero/);
    expect(body('/api/Transactions/{id}/refund', 'post').properties.amount.description).toMatch(/greater than zero/);
  });
});
