import { execFile } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { promisify } from 'node:util';
import { afterAll, beforeAll, describe, expect, inject, it } from 'vitest';
import { EVENT_TYPES } from '@billing/contracts';

/**
 * The served OpenAPI document (every route registered, including ones added later) passes
 * Spectral's OpenAPI ruleset and Redocly's recommended rules with 0 errors, using the linters
 * installed in node_modules (no network). Regression for: 52 Spectral errors from zod `$id`s,
 * request bodies in output mode (defaults required, `unknown` types), no operationIds, no
 * response headers, no webhooks section.
 */
const root = resolve(import.meta.dirname, '../..');
const bin = (name: string) => join(root, 'node_modules/.bin', name);
const run = promisify(execFile);
const dir = mkdtempSync(join(tmpdir(), 'bp-openapi-'));
const file = join(dir, 'openapi.json');
let doc: any;

beforeAll(async () => {
  const res = await fetch(`${inject('gatewayUrl')}/openapi.json`);
  expect(res.status).toBe(200);
  doc = await res.json();
  writeFileSync(file, JSON.stringify(doc, null, 2));
});

afterAll(() => rmSync(dir, { recursive: true, force: true }));

type Operation = { method: string; path: string; op: any };
const operations = (): Operation[] => Object.entries(doc.paths).flatMap(([path, ops]: [string, any]) => Object.entries(ops).map(([method, op]) => ({ method, path, op })));

describe('OpenAPI document', () => {
  it('has 0 errors under Spectral\'s OpenAPI ruleset', async () => {
    // Spectral exits non-zero when it finds errors; the JSON report is on stdout either way.
    const out = await run(bin('spectral'), ['lint', file, '--ruleset', join(root, '.spectral.yaml'), '--format', 'json', '--quiet'], { cwd: root, maxBuffer: 64 << 20 }).catch((e) => e);
    const results: { code: string; message: string; path: string[]; severity: number }[] = JSON.parse(out.stdout || '[]');
    const errors = results.filter((r) => r.severity === 0).map((r) => `${r.code} at ${r.path.join('.')}: ${r.message}`);
    console.info(`spectral: ${errors.length} errors, ${results.filter((r) => r.severity === 1).length} warnings`);
    expect(errors).toEqual([]);
  }, 120_000);

  it('has 0 errors under Redocly\'s recommended rules', async () => {
    const env = { ...process.env, REDOCLY_TELEMETRY: 'off', REDOCLY_SUPPRESS_UPDATE_NOTICE: 'true' };
    const out = await run(bin('redocly'), ['lint', file, '--config', join(root, 'redocly.yaml'), '--format', 'json'], { cwd: root, env, maxBuffer: 64 << 20 }).catch((e) => e);
    const report = JSON.parse(out.stdout.slice(out.stdout.indexOf('{')));
    const errors = report.problems.filter((p: any) => p.severity === 'error').map((p: any) => `${p.ruleId}: ${p.message} at ${p.location?.[0]?.pointer}`);
    console.info(`redocly: ${report.totals.errors} errors, ${report.totals.warnings} warnings`);
    expect(errors).toEqual([]);
    expect(report.totals.errors).toBe(0);
  }, 120_000);

  it('names every operation and leaks no zod $id', () => {
    const ids = operations().map((o) => o.op.operationId);
    expect(ids.every((id) => typeof id === 'string' && /^[A-Za-z0-9]+$/.test(id))).toBe(true);
    expect(new Set(ids).size).toBe(ids.length);
    expect(JSON.stringify(doc)).not.toContain('"$id"');
  });

  it('describes request bodies in input mode: defaulted fields optional, no untyped fields', () => {
    const plan = doc.components.schemas.CreatePlanRequest;
    for (const f of ['currency', 'intervalCount', 'trialDays', 'isActive']) expect(plan.required).not.toContain(f);
    const signup = doc.components.schemas.CustomerSignupRequest;
    for (const [name, s] of Object.entries<any>(signup.properties)) expect(Object.keys(s), name).not.toHaveLength(0);
    expect(signup.required).not.toContain('phone');
  });

  it('documents Location on 201, Retry-After on 429 and 503, Idempotent-Replayed and the rate-limit headers', () => {
    for (const { method, path, op } of operations()) {
      const where = `${method.toUpperCase()} ${path}`;
      if (op.responses['201']) expect(op.responses['201'].headers?.Location, where).toBeDefined();
      expect(op.responses['429'].headers['Retry-After'], where).toBeDefined();
      expect(op.responses['503'].headers['Retry-After'], where).toBeDefined();
      expect(op.responses['429'].headers['RateLimit-Limit'], where).toBeDefined();
      const idempotent = (op.parameters ?? []).some((p: any) => p.$ref === '#/components/parameters/IdempotencyKey');
      if (idempotent) expect(Object.values<any>(op.responses).find((r) => r.headers?.['Idempotent-Replayed']), where).toBeDefined();
    }
  });

  it('documents 403 on the merchant endpoints that answer it to a role below theirs (it was missing where a route named no other 403)', () => {
    for (const [method, path] of [
      ['delete', '/api/ApiKeys/{id}'],
      ['post', '/api/Subscriptions/{id}/pause'],
      ['post', '/api/Transactions/{id}/refund'],
      ['post', '/api/WebhookDeliveries/{id}/replay'],
      ['post', '/api/Products/{productId}/questions/reorder'],
      ['delete', '/api/Invitations/{id}'],
    ] as const) {
      expect(doc.paths[path]?.[method]?.responses['403'], `${method.toUpperCase()} ${path}`).toBeDefined();
    }
    // Not on endpoints no merchant credential reaches.
    expect(doc.paths['/api/account/me'].get.responses['403']).toBeUndefined();
  });

  it('documents 409 on every idempotent operation (key reused or in progress; the payment-method adds left it out)', () => {
    for (const { method, path, op } of operations()) {
      const idempotent = (op.parameters ?? []).some((p: any) => p.$ref === '#/components/parameters/IdempotencyKey');
      if (idempotent) expect(op.responses['409'], `${method.toUpperCase()} ${path}`).toBeDefined();
    }
    expect(doc.paths['/api/members/{memberId}/payment-methods'].post.responses['409']).toBeDefined();
  });

  it("declares the traceId and the field errors the checkout completion's error answers carry", () => {
    expect(Object.keys(doc.components.schemas.CheckoutCompletionResult.properties).sort()).toEqual(['errors', 'failureReason', 'returnUrl', 'status', 'traceId']);
    expect(doc.components.schemas.CheckoutCompletionResult.required).not.toContain('traceId');
    expect(doc.components.schemas.CheckoutCompletionResult.required).not.toContain('errors');
  });

  it('has a webhook for every event type, with the type and its data schema', () => {
    expect(Object.keys(doc.webhooks).sort()).toEqual([...EVENT_TYPES].sort());
    for (const type of EVENT_TYPES) {
      const ref: string = doc.webhooks[type].post.requestBody.content['application/json'].schema.$ref;
      const body = doc.components.schemas[ref.split('/').at(-1)!];
      expect(body.allOf[1].properties.type.const).toBe(type);
    }
  });

  it('describes every tag an operation is filed under', () => {
    const used = new Set(Object.values(doc.paths as Record<string, Record<string, { tags?: string[] }>>).flatMap((ops) => Object.values(ops).flatMap((op) => op.tags ?? [])));
    const described = new Map((doc.tags as { name: string; description?: string }[]).map((t) => [t.name, t.description ?? '']));
    // The sandbox's test helpers are described on their operations.
    const undescribed = [...used].filter((t) => t !== 'Test' && !(described.get(t) ?? '').trim());
    expect(undescribed).toEqual([]);
    expect(described.get('Hosted checkout')).toContain('POST /api/Checkout/sessions/resolve');
    expect(described.get('Merchant users')).toContain('POST /api/auth/login');
  });

  it("states every refusal of a webhook URL: credentials in it, and in production a host that does not resolve (both were 400 with nothing in the reference saying so)", () => {
    const description: string = doc.paths['/api/ApiKeys/{id}/webhook'].put.description;
    expect(description).toContain('carrying credentials (a user name or password before the host');
    expect(description).toContain('a host name that does not resolve when the URL is set is 400');
  });

  it('keeps the statements a later edit of the reference had put back to their old text: the sandbox keeps its ledger across restarts, a plan without questions goes on to Review', () => {
    const text = JSON.stringify({ info: doc.info, tags: doc.tags, paths: doc.paths });
    expect(text.includes('a sandbox restart forgets tokens and charges'), 'sandbox said to forget its ledger').toBe(false);
    expect(text.includes('(SANDBOX_LEDGER=file, the default)'), 'sandbox ledger file').toBe(true);
    expect(text.includes('A chosen plan whose product has no questions goes on to Review without an answers save.'), 'plan without questions').toBe(true);
  });

  it("tells a webhook receiver what it needs: that transaction.failed comes for refunds too, how to rotate a signing secret, what data and timestamp hold, and that a PastDue subscription's recovery sends subscription.recovered", () => {
    expect(doc.webhooks['transaction.failed'].post.summary).toMatch(/a refund failed \(data\.kind says which/);
    // Only the first letter of a summary is lowered in a description: the status is PastDue, never "pastdue".
    expect(doc.webhooks['subscription.past_due'].post.description).toContain('when a charge of a subscription failed: it is PastDue');
    const deliveries: string = doc.tags.find((t: { name: string }) => t.name === 'Webhook deliveries').description;
    expect(deliveries).toContain('Rotating a signing secret: a key\'s signing secret never changes, so rotating it means a new API key.');
    expect(deliveries).toContain('a fee statement adds statementId and leaves out notes and createdAt');
    expect(deliveries).toContain('timestamp is when the event was recorded');
    expect(JSON.stringify(doc.tags)).toContain('Active again (subscription.recovered');
    expect(doc.webhooks['subscription.recovered'].post.summary).toContain('it is Active again');
  });

  it('says how the API is versioned', () => {
    expect(doc.info.version).toBe('1.0.0');
    const intro: string = doc.info.description;
    const section = intro.slice(intro.indexOf('**Versioning**'));
    expect(intro).toContain('**Versioning**');
    expect(section).toContain('version 1.0.0');
    expect(section).toMatch(/additive only/);
    expect(section).toContain('/api/v2/');
  });

  it('sends nobody outside the repository: no external links in the reference text', () => {
    const text = JSON.stringify({ info: doc.info, tags: doc.tags, paths: doc.paths, webhooks: doc.webhooks });
    expect(text.match(/https?:\/\/(?!(hooks\.)?example\.com)[^\s"')]+/g) ?? []).toEqual([]);
    expect(text).not.toMatch(/interface\.md|contract\.md/);
    // Nor the design notes it was written from, by section: a reader has only this reference.
    expect(JSON.stringify(doc)).not.toMatch(/\b(contract|interface)\s*(§|section\b)/i);
  });

  it('says, on every list whose merchantId the platform admin token must give, that it must (the lists of API keys, plans, members, subscriptions, webhook deliveries and fee statements did not)', async () => {
    const silent: string[] = [];
    for (const [path, ops] of Object.entries<any>(doc.paths)) {
      const param = ops.get?.parameters?.find((p: any) => p.in === 'query' && p.name === 'merchantId');
      if (!param || path.includes('{') || !('merchant' in ops.get['x-auth'])) continue;
      const res = await fetch(`${inject('gatewayUrl')}${path}`, { headers: { authorization: `Bearer ${inject('adminToken')}` } });
      const body = (await res.json()) as { errors?: Record<string, string[]> };
      if (res.status === 400 && body.errors?.merchantId && !/required with the platform admin token/i.test(param.description ?? '')) silent.push(path);
    }
    expect(silent).toEqual([]);
  });
});

describe('the gateway answers with the documented rate-limit headers', () => {
  it('sets RateLimit-Limit and RateLimit-Remaining on an API response', async () => {
    const res = await fetch(`${inject('gatewayUrl')}/api/admin/merchants`, { headers: { authorization: `Bearer ${inject('adminToken')}` } });
    expect(res.status).toBe(200);
    expect(res.headers.get('ratelimit-limit')).toMatch(/^\d+$/);
    expect(res.headers.get('ratelimit-remaining')).toMatch(/^\d+$/);
    // They name the limit closest to running out as a share of its quota, among those the
    // structured RateLimit and RateLimit-Policy fields list.
    const items = (h: string) => new Map([...h.matchAll(/"([^"]+)";(\w)=(\d+)/g)].map((m) => [m[1]!, Number(m[3])]));
    const quota = items(res.headers.get('ratelimit-policy')!);
    const left = items(res.headers.get('ratelimit')!);
    const tightest = [...left].sort(([a, r], [b, s]) => r / quota.get(a)! - s / quota.get(b)!)[0]!;
    expect([res.headers.get('ratelimit-limit'), res.headers.get('ratelimit-remaining')]).toEqual([String(quota.get(tightest[0])), String(tightest[1])]);
  });
});
