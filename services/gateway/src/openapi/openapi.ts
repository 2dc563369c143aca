import { z, type ZodType } from 'zod';
import { EVENT_TYPES, WEBHOOK_EVENT_DATA, WEBHOOK_EVENT_SUMMARIES } from '@billing/contracts';
import type { RouteSpec } from '../http/route.js';
import { decisionsFor, DECISION_TAGS, INTRODUCTION } from './decisions.js';
import { EXAMPLES } from './examples.js';

const REF_BASE = '#/components/schemas/';
/** Marks references made in input mode until it is known whether an input variant is needed. */
const INPUT_MARK = '~input';

type Json = Record<string, unknown>;

const INT32_MIN = -2_147_483_648;
const INT32_MAX = 2_147_483_647;

/**
 * The wire formats of numbers, for clients generated from the document: every integer the API
 * takes or answers is an int32 (zod bounds an unbounded `.int()` by ±2^53, which generators
 * read as a 64-bit integer), every other number a double (amounts in major units).
 */
function numberFormat(v: Record<string, unknown>): Record<string, unknown> {
  if (v.format !== undefined) return v;
  if (v.type === 'number') return { ...v, format: 'double' };
  if (v.type !== 'integer') return v;
  const min = v.minimum === Number.MIN_SAFE_INTEGER || v.minimum === undefined ? INT32_MIN : (v.minimum as number);
  const max = v.maximum === Number.MAX_SAFE_INTEGER || v.maximum === undefined ? INT32_MAX : (v.maximum as number);
  return min >= INT32_MIN && max <= INT32_MAX ? { ...v, format: 'int32', minimum: min, maximum: max } : v;
}

/** Drops zod's `$id`/`$schema` (they leak as bogus identifiers into OpenAPI components); names number formats. */
function clean<T>(value: T): T {
  return JSON.parse(
    JSON.stringify(value, (k, v) => {
      if (k === '$id' || k === '$schema') return undefined;
      // zod writes "any value" as {}; say it plainly.
      if (k === 'additionalProperties' && v && typeof v === 'object' && Object.keys(v).length === 0) return true;
      if (v && typeof v === 'object' && !Array.isArray(v) && (v.type === 'integer' || v.type === 'number')) return numberFormat(v);
      return v;
    }),
  );
}

/**
 * The registered (named) zod schemas as components, in both modes: responses use output mode
 * (what the API sends), request bodies input mode (what a client may send: fields with defaults
 * optional, preprocessed fields typed by what they accept). A schema whose two modes agree is one
 * component; one that differs also gets `<Name>Input`.
 */
function registryComponents(): { schemas: Record<string, Json>; inputRef: (id: string) => string } {
  const out = clean((z.toJSONSchema(z.globalRegistry, { unrepresentable: 'any', io: 'output', uri: (id) => REF_BASE + id }) as { schemas: Record<string, Json> }).schemas);
  const inp = clean((z.toJSONSchema(z.globalRegistry, { unrepresentable: 'any', io: 'input', uri: (id) => REF_BASE + id + INPUT_MARK }) as { schemas: Record<string, Json> }).schemas);
  const refsOf = (s: Json) => [...JSON.stringify(s).matchAll(new RegExp(`"${REF_BASE}([^"~]+)${INPUT_MARK}"`, 'g'))].map((m) => m[1]!);
  const differs = new Set(Object.keys(inp).filter((id) => JSON.stringify(inp[id]).replaceAll(INPUT_MARK, '') !== JSON.stringify(out[id])));
  // A schema referring to one with an input variant needs an input variant too.
  for (let grew = true; grew; ) {
    grew = false;
    for (const id of Object.keys(inp)) if (!differs.has(id) && refsOf(inp[id]!).some((r) => differs.has(r))) grew = differs.add(id) !== undefined;
  }
  const inputRef = (id: string) => (differs.has(id) ? `${id}Input` : id);
  const resolve = (s: Json): Json => JSON.parse(JSON.stringify(s).replace(new RegExp(`"${REF_BASE}([^"~]+)${INPUT_MARK}"`, 'g'), (_m, id: string) => `"${REF_BASE}${inputRef(id)}"`));
  const schemas: Record<string, Json> = { ...out };
  for (const id of differs) schemas[`${id}Input`] = resolve(inp[id]!);
  return { schemas, inputRef };
}

/** JSON Schema of one zod schema, with named (registered) schemas as component references. */
function schemaOf(schema: ZodType, io: 'input' | 'output', inputRef: (id: string) => string): Json {
  const name = (id: string) => (io === 'input' ? inputRef(id) : id);
  const id = z.globalRegistry.get(schema)?.id;
  if (id) return { $ref: REF_BASE + name(id) };
  const { $defs: _d, ...json } = clean(z.toJSONSchema(schema, { unrepresentable: 'any', io })) as Json;
  return JSON.parse(JSON.stringify(json).replace(/"#\/\$defs\/([^"]+)"/g, (_m, def: string) => `"${REF_BASE}${name(def)}"`));
}

/** Query or path parameters of an object schema. */
function parametersOf(schema: ZodType | undefined, where: 'path' | 'query'): Json[] {
  if (!schema) return [];
  const json = clean(z.toJSONSchema(schema, { unrepresentable: 'any', io: 'input' })) as { properties?: Record<string, Json>; required?: string[] };
  return Object.entries(json.properties ?? {}).map(([name, s]) => {
    const { description, ...rest } = s;
    return { name, in: where, required: where === 'path' || (json.required ?? []).includes(name), ...(description ? { description } : {}), schema: rest };
  });
}

/**
 * A stable operationId from method and path, so every route (also ones added later) has one:
 * `GET /api/Members/{id}` → `getMembersById`, `POST /api/Subscriptions/{id}/pause` →
 * `postSubscriptionsByIdPause`. A route may name its own with `operationId`.
 */
export function operationIdOf(method: string, url: string): string {
  const words = url
    .split('/')
    .filter((s) => s && s !== 'api')
    .map((s) => {
      const param = /^[:{](\w+)}?$/.exec(s);
      const word = param ? `By-${param[1]}` : s;
      return word
        .split(/[^A-Za-z0-9]+/)
        .filter(Boolean)
        .map((w) => w[0]!.toUpperCase() + w.slice(1))
        .join('');
    });
  return method.toLowerCase() + words.join('');
}

const STATUS_TEXT: Record<number, string> = {
  200: 'OK', 201: 'Created', 202: 'Accepted', 204: 'No Content', 400: 'Validation failed', 401: 'Missing or invalid credential', 403: 'Forbidden', 404: 'Not found',
  409: 'Conflict', 410: 'Gone', 413: 'Payload too large', 415: 'Unsupported media type', 422: 'Unprocessable', 429: 'Too many requests', 500: 'Internal error', 502: 'An external provider failed (the payment provider, or the email or SMS channel)', 503: 'Service unavailable',
};

const MERCHANT_QUERY = "The merchant to read; defaults to the credential's merchant (an API key's or merchant user's own; naming another merchant is 403, or 404 when no such merchant exists). Required with the platform admin token, which has no merchant: without it 400 naming merchantId.";

const HEADERS: Record<string, Json> = {
  Location: { description: 'The URL of the created resource (also reproduced on an idempotent replay).', schema: { type: 'string' } },
  RetryAfter: { description: 'Whole seconds (at least 1) to wait before trying again.', schema: { type: 'integer', format: 'int32', minimum: 1 } },
  IdempotentReplayed: {
    description: '`true` when this response is the stored outcome of an earlier request with the same Idempotency-Key (status, body and Location reproduced).',
    schema: { type: 'string', enum: ['true'] },
  },
  RateLimitPolicy: {
    description: 'The limits this request was counted against (draft-ietf-httpapi-ratelimit-headers), on every answer given once the request has been counted against its credential\'s limit (or, on an anonymous route, its client\'s); absent, like the other RateLimit headers, from answers given before that: a 401 for a missing or invalid credential, a body refused unread (400 malformed JSON, 413, 415). One item per limit, e.g. `"ip";q=600;w=2, "credential";q=200;w=2` (q: bucket size in requests, w: seconds to refill from empty). Names: ip, password-ip, password-account, auth-failures, credential.',
    schema: { type: 'string' },
  },
  RateLimit: {
    description: 'The state of each limit after this request, in the order of RateLimit-Policy, e.g. `"ip";r=599;t=1` (r: whole requests left now, t: seconds until the bucket is full again).',
    schema: { type: 'string' },
  },
  RateLimitLimit: { description: 'Earlier drafts\' field, still sent: the burst size of the limit closest to running out.', schema: { type: 'integer', format: 'int32' } },
  RateLimitRemaining: { description: 'Requests the caller may still make at once before being limited (as this gateway replica sees the bucket).', schema: { type: 'integer', format: 'int32', minimum: 0 } },
  XTraceId: {
    description: 'The trace id of this request (32 lowercase hex digits; the `traceparent` trace id when the request carried one): the `traceId` of a problem-details body, and what to quote to the operator, who finds the request\'s logs and spans by it.',
    schema: { type: 'string', pattern: '^[0-9a-f]{32}$' },
  },
  WWWAuthenticate: {
    description: 'The scheme the endpoint wants (RFC 6750): `Bearer realm="api"`, with `error="invalid_token"` when an Authorization header was sent.',
    schema: { type: 'string' },
  },
};
const header = (name: keyof typeof HEADERS) => ({ $ref: `#/components/headers/${name}` });
/** The headers of a response the rate limits counted. */
const RATE_LIMIT_HEADERS = { 'RateLimit-Policy': header('RateLimitPolicy'), RateLimit: header('RateLimit'), 'RateLimit-Limit': header('RateLimitLimit'), 'RateLimit-Remaining': header('RateLimitRemaining') };

/** The OpenAPI 3.1 document, generated from the same zod schemas the gateway validates with. */
export function buildOpenApi(routes: RouteSpec[], version: string): Json {
  const { schemas, inputRef } = registryComponents();
  schemas.ProblemDetails = { ...schemas.ProblemDetails, description: decisionsFor('Errors') };
  const paths: Record<string, Record<string, unknown>> = {};
  const tags = new Set<string>();
  for (const r of routes) {
    const path = r.url.replace(/:(\w+)/g, '{$1}');
    tags.add(r.tag);
    const limited = r.rateLimited !== false;
    const examples = r.examples ?? EXAMPLES[`${r.method} ${path}`];
    const responses: Record<string, unknown> = {};
    // A merchant route answers 403 to a role below its own and to another merchant named in the request.
    // An idempotent route answers 409 to its key reused with another request, or still in progress.
    // A request that may carry a body (any method but GET) is refused 413 over the size limit and
    // 415 with a Content-Type that is not JSON, before its route runs, whether or not it takes one.
    const bodyRefusals = r.method === 'GET' ? [] : [413, 415];
    const statuses = new Set([...Object.keys(r.responses).map(Number), ...('anonymous' in r.auth ? [] : [401]), ...('merchant' in r.auth ? [403] : []), 400, ...bodyRefusals, ...(r.idempotent ? [409] : []), ...(limited ? [429] : []), 500, 503]);
    for (const status of [...statuses].sort()) {
      const schema = r.responses[status];
      const description = status === 429 ? decisionsFor('Rate limits') : (STATUS_TEXT[status] ?? String(status));
      const headers: Record<string, unknown> = { 'X-Trace-Id': header('XTraceId') };
      if (status === 201) headers.Location = header('Location');
      if (status === 401) headers['WWW-Authenticate'] = header('WWWAuthenticate');
      if (status === 429 || status === 503 || (status === 409 && r.idempotent)) headers['Retry-After'] = header('RetryAfter');
      // Only a 2xx or 5xx outcome is kept and replayed (a 4xx releases the key: the retry runs again).
      if (r.idempotent && (status < 400 || status >= 500)) headers['Idempotent-Replayed'] = header('IdempotentReplayed');
      if (limited) Object.assign(headers, RATE_LIMIT_HEADERS);
      const base = { description, headers };
      const example = examples?.responses?.[status];
      const problem = { 'application/problem+json': { schema: { $ref: `${REF_BASE}ProblemDetails` } } };
      // An error status with a schema of its own answers that body (checkout completion results);
      // errors raised before the route (malformed JSON, limits) are still problem details.
      if (status >= 400 && schema) responses[status] = { ...base, content: { 'application/json': { schema: schemaOf(schema, 'output', inputRef) }, ...problem } };
      else if (status >= 400) responses[status] = { ...base, content: problem };
      else if (schema) responses[status] = { ...base, content: { 'application/json': { schema: schemaOf(schema, 'output', inputRef), ...(example !== undefined ? { example } : {}) } } };
      else responses[status] = base;
    }
    const parameters: Json[] = [...parametersOf(r.params, 'path'), ...parametersOf(r.query, 'query')];
    // A merchant endpoint's merchantId query parameter: what it defaults to, and that the platform admin token (which has no merchant) must give it.
    for (const p of parameters) if (p.in === 'query' && p.name === 'merchantId' && 'merchant' in r.auth) p.description ??= MERCHANT_QUERY;
    if (r.idempotent) parameters.push({ $ref: '#/components/parameters/IdempotencyKey' });
    const bodyExample = examples?.request;
    (paths[path] ??= {})[r.method.toLowerCase()] = {
      operationId: r.operationId ?? operationIdOf(r.method, path),
      tags: [r.tag],
      summary: r.summary,
      description: r.description,
      security: 'anonymous' in r.auth ? [] : [{ bearer: [] }],
      'x-auth': r.auth,
      parameters: parameters.length ? parameters : undefined,
      // No body is read as the empty object: a body whose fields are all optional may be left out.
      requestBody: r.body
        ? { required: !r.body.safeParse({}).success, content: { 'application/json': { schema: schemaOf(r.body, 'input', inputRef), ...(bodyExample !== undefined ? { example: bodyExample } : {}) } } }
        : undefined,
      responses,
    };
  }
  // Served beside the routes, without a credential: what a client verifying the platform's JWTs needs.
  paths['/.well-known/jwks.json'] = {
    get: {
      operationId: 'getJwks',
      tags: ['Authentication'],
      summary: "The public keys of the platform's JWTs",
      description:
        'The JSON Web Key Set (RFC 7517) of the keys that sign every JWT the platform issues (merchant users, customers, checkout sessions): EC P-256 keys for ES256, each with the kid that the tokens name in their header.',
      security: [],
      responses: {
        200: {
          description: 'OK',
          headers: { 'X-Trace-Id': header('XTraceId'), ...RATE_LIMIT_HEADERS },
          content: {
            'application/json': {
              schema: {
                type: 'object',
                required: ['keys'],
                properties: {
                  keys: {
                    type: 'array',
                    items: {
                      type: 'object',
                      required: ['kty', 'crv', 'x', 'y', 'kid', 'alg', 'use'],
                      properties: { kty: { const: 'EC' }, crv: { const: 'P-256' }, x: { type: 'string' }, y: { type: 'string' }, kid: { type: 'string' }, alg: { const: 'ES256' }, use: { const: 'sig' } },
                    },
                  },
                },
              },
            },
          },
        },
        // The limit by client IP counts it (as /openapi.json).
        429: {
          description: decisionsFor('Rate limits'),
          headers: { 'X-Trace-Id': header('XTraceId'), 'Retry-After': header('RetryAfter'), ...RATE_LIMIT_HEADERS },
          content: { 'application/problem+json': { schema: { $ref: `${REF_BASE}ProblemDetails` } } },
        },
        503: {
          description: STATUS_TEXT[503],
          headers: { 'X-Trace-Id': header('XTraceId'), 'Retry-After': header('RetryAfter') },
          content: { 'application/problem+json': { schema: { $ref: `${REF_BASE}ProblemDetails` } } },
        },
      },
    },
  };
  tags.add('Authentication');
  const tagList = [...tags].map((name) => ({ name, ...(DECISION_TAGS[name] ? { description: DECISION_TAGS[name] } : {}) }));
  const webhooks = webhooksSection(schemas, inputRef);
  tagList.push({
    name: 'Webhook events',
    description: decisionsFor('Webhooks')
      .split('\n')
      .filter((b) => /^- (Body|Signature|Delivered types|Who receives)/.test(b))
      .join('\n'),
  });
  const used: Json = { paths, webhooks };
  pruneUnused(schemas, used);
  return {
    openapi: '3.1.0',
    info: { title: 'Subscription Billing Platform API', version, description: INTRODUCTION, license: { name: 'Proprietary', identifier: 'LicenseRef-Proprietary' } },
    servers: [{ url: '/', description: 'This gateway' }],
    tags: tagList,
    components: {
      securitySchemes: { bearer: { type: 'http', scheme: 'bearer', description: decisionsFor('Authentication') } },
      parameters: {
        IdempotencyKey: { name: 'Idempotency-Key', in: 'header', required: true, description: decisionsFor('Idempotency'), schema: { type: 'string', minLength: 1, maxLength: 255 } },
      },
      headers: HEADERS,
      schemas,
    },
    paths: used.paths,
    webhooks: used.webhooks,
  };
}

/**
 * Drops components nothing refers to (a request schema's output form, input forms of response
 * schemas), then gives an input form whose output form is gone the plain name.
 */
function pruneUnused(schemas: Record<string, Json>, users: Json): void {
  for (let removed = true; removed; ) {
    removed = false;
    const text = JSON.stringify([users, schemas]);
    for (const name of Object.keys(schemas)) {
      if (!text.includes(`"${REF_BASE}${name}"`)) {
        delete schemas[name];
        removed = true;
      }
    }
  }
  const renames = Object.keys(schemas).filter((n) => n.endsWith('Input') && !schemas[n.slice(0, -5)]);
  if (!renames.length) return;
  const rename = (text: string) => renames.reduce((t, n) => t.replaceAll(`"${REF_BASE}${n}"`, `"${REF_BASE}${n.slice(0, -5)}"`), text);
  for (const n of renames) {
    schemas[n.slice(0, -5)] = schemas[n]!;
    delete schemas[n];
  }
  for (const [k, v] of Object.entries(JSON.parse(rename(JSON.stringify(schemas))))) schemas[k] = v as Json;
  for (const [k, v] of Object.entries(JSON.parse(rename(JSON.stringify(users))))) users[k] = v;
}

/** One OpenAPI 3.1 webhook per event type: the signed POST the platform sends, with its `data` schema. */
/** "A charge of a subscription failed: it is PastDue" in the middle of a sentence: only the first letter lowered. */
const lowerFirst = (text: string): string => text.charAt(0).toLowerCase() + text.slice(1);

function webhooksSection(schemas: Record<string, Json>, inputRef: (id: string) => string): Record<string, unknown> {
  const signature = [
    { name: 'webhook-id', in: 'header', required: true, description: 'The event id: the same on every attempt and replay; de-duplicate on it.', schema: { type: 'string', format: 'uuid' } },
    { name: 'webhook-timestamp', in: 'header', required: true, description: 'Unix seconds of this attempt.', schema: { type: 'string', pattern: '^[0-9]+$' } },
    {
      name: 'webhook-signature',
      in: 'header',
      required: true,
      description: '`v1,` + base64 HMAC-SHA256 of `{webhook-id}.{webhook-timestamp}.{body}` keyed with the key\'s signing secret (Standard Webhooks).',
      schema: { type: 'string', pattern: '^v1,' },
    },
  ];
  const out: Record<string, unknown> = {};
  for (const type of EVENT_TYPES) {
    const data = schemaOf(WEBHOOK_EVENT_DATA[type], 'output', inputRef);
    const name = `${type.replace(/(^|[._])(\w)/g, (_m, _s, c: string) => c.toUpperCase())}Webhook`;
    schemas[name] = {
      description: `The body of a \`${type}\` webhook.`,
      allOf: [{ $ref: `${REF_BASE}WebhookPayload` }, { type: 'object', properties: { type: { const: type }, data } }],
    };
    out[type] = {
      post: {
        operationId: `webhook${name.replace(/Webhook$/, '')}`,
        tags: ['Webhook events'],
        summary: WEBHOOK_EVENT_SUMMARIES[type],
        description: `Sent to every enabled, subscribed API key of the merchant when ${lowerFirst(WEBHOOK_EVENT_SUMMARIES[type])}. Answer 2xx within 15 s; anything else is retried.`,
        parameters: signature,
        requestBody: { required: true, content: { 'application/json': { schema: { $ref: `${REF_BASE}${name}` } } } },
        responses: { '200': { description: 'Received. Any 2xx counts as delivered.' }, '429': { description: 'The next attempt waits at least Retry-After.' } },
        security: [],
      },
    };
  }
  return out;
}
