import { randomBytes } from 'node:crypto';
import { createServer, type IncomingMessage, type Server, type ServerOptions, type ServerResponse } from 'node:http';
import type { Duplex } from 'node:stream';
import Fastify, { type FastifyInstance, type FastifyReply, type FastifyRequest, type FastifyServerOptions } from 'fastify';
import { DomainError, fieldErrorsOf } from '@billing/contracts';
import { context, currentTraceId, incomingContext, propagatesContextManually, recordHttpRequest } from '@billing/telemetry';
import type { Logger } from '@billing/service-runtime';
import { authorize } from '../auth/access.js';
import type { Authenticator } from '../auth/authenticator.js';
import { parseBearer } from '../auth/bearer.js';
import type { Principal } from '../auth/principal.js';
import { assertParseableDepth, assertStorableText, assertUtf8Query, decodeUtf8Body, DEFAULT_BODY_MAX_DEPTH } from './input-policy.js';
import { HTTP_STATUS, problemOf, PROBLEM_CONTENT_TYPE } from './problem.js';
import type { RouteContext, RouteResult, RouteSpec } from './route.js';

export const BODY_LIMIT_BYTES = 1024 * 1024;
/** Longest path segment a route parameter matches; ids are far shorter. */
const MAX_PARAM_LENGTH = 500;
/** Every response, success or error, carries the request's trace id (W3C trace id, 32 hex) in this header. */
export const TRACE_ID_HEADER = 'x-trace-id';

declare module 'fastify' {
  interface FastifyRequest {
    principal?: Principal;
    /** Set by the first hook, before anything can fail; also sent as the `X-Trace-Id` header. */
    traceId?: string;
    /** The JSON body bytes exactly as received (idempotency fingerprints hash them). */
    rawBody?: Buffer;
    /** Set once the route's handler (or the refusal of its body) has begun: errors before it come from reading the body. */
    handlerStarted?: boolean;
  }
}

/**
 * Fastify's refusals of a request's body (read before the route's handler runs), and the ones
 * the JSON parser below raises (`bodyRefusal`): on a route that takes an Idempotency-Key they are
 * that key's outcome (see `refusedBody`).
 */
const BODY_REFUSAL_CODES = new Set(['FST_ERR_CTP_BODY_TOO_LARGE', 'FST_ERR_CTP_INVALID_MEDIA_TYPE', 'FST_ERR_CTP_INVALID_CONTENT_LENGTH', 'FST_ERR_CTP_EMPTY_JSON_BODY', 'MALFORMED_JSON']);
const bodyRefusals = new WeakSet<object>();
function bodyRefusal<E extends Error>(e: E): E {
  bodyRefusals.add(e);
  return e;
}
const isBodyRefusal = (err: unknown) => typeof err === 'object' && err !== null && (bodyRefusals.has(err) || BODY_REFUSAL_CODES.has((err as { code?: string }).code ?? ''));

/**
 * The bytes an idempotency fingerprint takes for a body that was refused unread (over the size
 * limit, or not JSON): no JSON body hashes alike, so the key's next request with a body that
 * was read is a different request (409), and the same unread refusal again is the same one.
 */
const UNREAD_BODY = Buffer.from('\u0000 body refused unread');

/** What a route carries in fastify's route config: the spec of an API route; `clientLimited` for other routes the per-client-IP limit counts. */
interface RouteConfig {
  spec?: RouteSpec;
  clientLimited?: boolean;
}

const routeConfigOf = (request: FastifyRequest) => request.routeOptions.config as RouteConfig | undefined;

/** Route options of a route outside the API (the reference, its document) that counts against the per-client-IP limit as API routes do. */
export const CLIENT_LIMITED = { config: { clientLimited: true } satisfies RouteConfig };

/**
 * Cross-cutting steps around every route, supplied by their own features, in this order:
 * `admitClient` (the limit by client IP, as the request arrives, before anything costs), `admit`
 * (the password routes' limits, once the body names the account), `beforeAuthentication` and
 * `authenticationFailed` around verifying a bearer credential, `limitRate` (per credential,
 * after authentication); idempotency wraps the handler of routes marked `idempotent`.
 */
export interface RequestPipeline {
  /** Every request to a route (and to a CLIENT_LIMITED one) as it arrives, before its body is read (limits by client IP). */
  admitClient?(request: FastifyRequest, reply: FastifyReply): void;
  admit?(spec: RouteSpec, request: FastifyRequest, reply: FastifyReply): void;
  beforeAuthentication?(request: FastifyRequest, reply: FastifyReply): void;
  authenticationFailed?(request: FastifyRequest): void;
  limitRate?(request: FastifyRequest, principal: Principal | undefined, reply: FastifyReply): Promise<void> | void;
  /** A route's request failed with `error` after admission (a password route's 401: its account's failure). */
  failed?(request: FastifyRequest, error: DomainError): void;
  /** A route's request succeeded (a 2xx result) after admission (a password route's sign-in: its account's failures are reset). */
  succeeded?(request: FastifyRequest): void;
  /** `run` parses the inputs and calls the handler, so validation failures are outcomes of the run. */
  runIdempotent?(spec: RouteSpec, request: FastifyRequest, principal: Principal | undefined, run: () => Promise<RouteResult>): Promise<RouteResult>;
}

export interface HttpServerOptions {
  logger: Logger;
  authenticator: Authenticator;
  pipeline?: RequestPipeline;
  /** fastify `trustProxy`: true, a hop count, or addresses/CIDRs of trusted proxies. */
  trustProxy?: boolean | number | string;
  /** Arrays and objects a JSON body may nest (BODY_MAX_DEPTH); deeper is 400. */
  bodyMaxDepth?: number;
  /**
   * Milliseconds a client has to send a whole request, header section and body
   * (HTTP_REQUEST_TIMEOUT_MS); past it the request is answered 408 and its connection closed.
   * `0`: no limit. Only receiving counts: a slow handler (a billing run) is not cut short.
   */
  requestTimeoutMs?: number;
  /** Milliseconds a client has to send the header section (HTTP_HEADERS_TIMEOUT_MS), at most `requestTimeoutMs`. */
  headersTimeoutMs?: number;
  /** Milliseconds an idle kept-alive connection stays open (HTTP_KEEP_ALIVE_TIMEOUT_MS); fastify's 72 s when absent. */
  keepAliveTimeoutMs?: number;
}

export const DEFAULT_REQUEST_TIMEOUT_MS = 30_000;
export const DEFAULT_HEADERS_TIMEOUT_MS = 10_000;

/**
 * Node's HTTP server options for these timeouts. Node looks for expired requests every
 * `connectionsCheckingInterval` (30 s by default, which would let a 30 s timeout fire after up to
 * a minute): a tenth of the timeout, between 50 ms and 1 s, keeps it within 10 % (at most 1 s) late.
 */
function requestTimeouts(requestTimeoutMs: number, headersTimeoutMs: number): { requestTimeout: number; headersTimeout: number; connectionsCheckingInterval: number } {
  const headersTimeout = requestTimeoutMs > 0 ? Math.min(headersTimeoutMs, requestTimeoutMs) : headersTimeoutMs;
  const shortest = Math.min(...[requestTimeoutMs, headersTimeout].filter((t) => t > 0), 10_000);
  return { requestTimeout: requestTimeoutMs, headersTimeout, connectionsCheckingInterval: Math.max(50, Math.min(1000, Math.floor(shortest / 10))) };
}

function sendProblem(reply: FastifyReply, request: FastifyRequest, e: DomainError, status = HTTP_STATUS[e.code]): FastifyReply {
  const retry = e.extensions.retryAfterSeconds;
  if (typeof retry === 'number') reply.header('retry-after', String(Math.max(1, Math.ceil(retry))));
  else if (status === 503) reply.header('retry-after', '1');
  // RFC 9110 §15.5.2: a 401 names the scheme it wants (RFC 6750: a bearer credential).
  if (status === 401) reply.header('www-authenticate', request.headers.authorization ? 'Bearer realm="api", error="invalid_token"' : 'Bearer realm="api"');
  const problem = problemOf(e, request.url.split('?')[0], status);
  problem.traceId = request.traceId ?? problem.traceId;
  return reply.code(status).type(PROBLEM_CONTENT_TYPE).send(problem);
}

/** How often `name` (lower case) occurs in Node's raw header list ([name, value, name, value, ...]). */
function countHeader(raw: string[], name: string): number {
  let n = 0;
  for (let i = 0; i < raw.length; i += 2) if (raw[i]!.length === name.length && raw[i]!.toLowerCase() === name) n++;
  return n;
}

/**
 * Headers that carry one value, given more than once: 400. Node would keep the first
 * Content-Type and join two Idempotency-Keys into "a, b" (a key no client sent, so a retry with
 * either one ran the request again). Idempotency-Key only on a route that takes it: any other
 * route ignores the header (interface rule 8: member creation, webhook replay and deep-link
 * resolve do not take it), however often it is given. Authorization is checked on
 * authenticated routes (401).
 */
function repeatedHeaderError(raw: string[], takesIdempotencyKey: boolean): DomainError | undefined {
  for (const name of takesIdempotencyKey ? ['idempotency-key', 'content-type'] : ['content-type']) {
    if (countHeader(raw, name) > 1) {
      const shown = name === 'content-type' ? 'Content-Type' : 'Idempotency-Key';
      return DomainError.validation({ [shown]: ['Given more than once; send it once.'] }, `The ${shown} header is given more than once.`);
    }
  }
  return undefined;
}

/** The `charset` parameter of a Content-Type, lower case, or undefined without one. */
function charsetOf(contentType: string | undefined): string | undefined {
  const m = /;\s*charset\s*=\s*"?([^";\s]*)"?/i.exec(contentType ?? '');
  return m ? m[1]!.toLowerCase() : undefined;
}

/** Fastify's own errors (parsing, limits) as the platform's DomainErrors. */
function domainErrorOf(err: unknown): DomainError | undefined {
  if (err instanceof DomainError) return err;
  const code = (err as { code?: string })?.code;
  switch (code) {
    case 'FST_ERR_CTP_BODY_TOO_LARGE':
      return new DomainError('payload_too_large', `The request body exceeds ${BODY_LIMIT_BYTES} bytes.`);
    case 'FST_ERR_CTP_INVALID_MEDIA_TYPE':
      return new DomainError('unsupported_media_type', 'Request bodies must be application/json.');
    case 'FST_ERR_CTP_INVALID_CONTENT_LENGTH':
    case 'FST_ERR_CTP_EMPTY_JSON_BODY':
      return new DomainError('bad_request', 'The request body is malformed.');
    case 'MALFORMED_JSON':
      return DomainError.validation({ $: ['The request body is not valid JSON.'] }, 'The request body is not valid JSON.');
  }
  const status = (err as { statusCode?: number })?.statusCode;
  if (status && status >= 400 && status < 500) return new DomainError('bad_request', (err as Error).message);
  return undefined;
}

/**
 * An HTTP server that runs every request in its trace context (`incomingContext`), with the
 * timeouts fastify would set on a server of its own.
 */
function tracedServer(handler: (req: IncomingMessage, res: ServerResponse) => void, opts: FastifyServerOptions): Server {
  const server = createServer({ ...(opts as { http?: ServerOptions }).http }, (req, res) => context.with(incomingContext(req.headers), () => handler(req, res)));
  if (opts.keepAliveTimeout !== undefined) server.keepAliveTimeout = opts.keepAliveTimeout;
  if (opts.requestTimeout !== undefined) server.requestTimeout = opts.requestTimeout;
  if (opts.connectionTimeout) server.setTimeout(opts.connectionTimeout);
  if (opts.maxRequestsPerSocket) server.maxRequestsPerSocket = opts.maxRequestsPerSocket;
  return server;
}

/** The trace id and security headers the first hook sets, for requests that never reach it. */
function startResponse(request: FastifyRequest, reply: FastifyReply): void {
  request.traceId = currentTraceId() ?? traceIdOf(request.headers.traceparent) ?? randomBytes(16).toString('hex');
  reply.header(TRACE_ID_HEADER, request.traceId);
  reply.header('x-content-type-options', 'nosniff');
  // API responses carry tokens, plaintext keys and signing secrets: never stored by any cache.
  // Every response, not only those whose target reads /api: the router also routes a target in
  // absolute form (`http://host/api/...`) and percent-encoded letters (`/%61pi/...`) there.
  // Responses that may be cached (page assets, the reference's bundle) say so themselves.
  reply.header('cache-control', 'no-store');
}

/**
 * The router's own errors. A path segment that is not percent-encoded UTF-8 is 400; one longer
 * than any identifier (maxParamLength) names nothing, so it is 404 like any unknown id.
 */
function answerFrameworkError(err: Error, request: FastifyRequest, reply: FastifyReply): void {
  startResponse(request, reply);
  const code = (err as { code?: string }).code;
  const e =
    code === 'FST_ERR_MAX_PARAM_LENGTH'
      ? new DomainError('not_found', `No resource at ${request.url.split('?')[0].slice(0, 200)}…: a path segment is over ${MAX_PARAM_LENGTH} characters.`)
      : new DomainError('bad_request', 'The request path is not valid percent-encoded UTF-8.');
  sendProblem(reply, request, e);
}

export function buildHttpServer(opts: HttpServerOptions): { app: FastifyInstance; register(spec: RouteSpec): void } {
  const { logger, authenticator, pipeline = {}, bodyMaxDepth = DEFAULT_BODY_MAX_DEPTH, requestTimeoutMs = DEFAULT_REQUEST_TIMEOUT_MS, headersTimeoutMs = DEFAULT_HEADERS_TIMEOUT_MS } = opts;
  const { requestTimeout, ...httpOptions } = requestTimeouts(requestTimeoutMs, headersTimeoutMs);
  const httpLog = logger.child({ component: 'http' });
  const accessLog = logger.child({ component: 'access' });
  const app: FastifyInstance = Fastify({
    // No per-request child logger: fastify would build one for every request (a measurable
    // share of the hot path); errors are logged below with the request's trace id instead.
    logger: false,
    bodyLimit: BODY_LIMIT_BYTES,
    // A request whose header section or body never finishes (`Content-Length: 100` and 9 bytes)
    // would otherwise hold its connection open for good: 408 from answerClientError.
    requestTimeout,
    ...(opts.keepAliveTimeoutMs !== undefined ? { keepAliveTimeout: opts.keepAliveTimeoutMs } : {}),
    http: httpOptions,
    routerOptions: { caseSensitive: false, ignoreTrailingSlash: true, maxParamLength: MAX_PARAM_LENGTH },
    // Only behind a known proxy may X-Forwarded-For name the client (it keys anonymous rate limits).
    trustProxy: (opts.trustProxy ?? false) as boolean,
    // Errors Node's HTTP parser raises before fastify sees a request (431, bad header bytes).
    clientErrorHandler: answerClientError,
    // Errors the router raises before any hook runs (a path that is not percent-encoded UTF-8,
    // a path segment over maxParamLength): problem details with a trace id like every other.
    frameworkErrors: answerFrameworkError,
    // Without span recording there is no http instrumentation to open each request's trace
    // context; the server does it, so the trace id reaches gRPC metadata, logs and outbox rows.
    ...(propagatesContextManually() ? { serverFactory: tracedServer } : {}),
  });

  // First hook of every request, routed or not: the trace id exists before anything can fail.
  // It is that of the request's trace context: the HTTP server span OpenTelemetry's http
  // instrumentation opened when spans are recorded, else the one `tracedServer` set (both
  // continue any `traceparent`); on untraced paths (/health) the caller's `traceparent`, else
  // (and without tracing, in unit tests) a fresh one.
  app.addHook('onRequest', (request, reply, done) => {
    startResponse(request, reply);
    const config = routeConfigOf(request);
    const repeated = repeatedHeaderError(request.raw.rawHeaders, config?.spec?.idempotent === true);
    if (repeated) return done(repeated);
    // A routed request counts against its client's limit before anything else costs: its body
    // is not read yet, so one refused as malformed, too deep or too large is counted as well.
    if (config?.spec || config?.clientLimited) {
      try {
        pipeline.admitClient?.(request, reply);
      } catch (e) {
        return done(e as Error);
      }
    }
    done();
  });
  // JSON parser that tolerates an empty body (POST /pause with a JSON content type) and marks
  // malformed JSON distinctly.
  app.removeAllContentTypeParsers();
  app.addContentTypeParser(/^application\/(?:[\w.+-]+\+)?json(?:\s*;.*)?$/i, { parseAs: 'buffer' }, (req, body: string | Buffer, done) => {
    req.rawBody = typeof body === 'string' ? Buffer.from(body) : body;
    const charset = charsetOf(req.headers['content-type']);
    if (charset !== undefined && charset !== 'utf-8' && charset !== 'utf8') {
      return done(bodyRefusal(new DomainError('unsupported_media_type', `Request bodies must be JSON in UTF-8; charset=${charset.slice(0, 40)} is not supported.`)), undefined);
    }
    let text: string;
    try {
      text = decodeUtf8Body(req.rawBody, bodyMaxDepth);
      assertParseableDepth(text, bodyMaxDepth);
    } catch (e) {
      return done(bodyRefusal(e as Error), undefined);
    }
    if (text.trim() === '') return done(null, undefined);
    try {
      done(null, JSON.parse(text));
    } catch {
      done(Object.assign(new Error('malformed JSON'), { code: 'MALFORMED_JSON', statusCode: 400 }), undefined);
    }
  });

  // One access-log line per request. The route template, never the URL: paths and query strings
  // can carry personal data.
  app.addHook('onResponse', async (request, reply) => {
    const route = request.routeOptions.url ?? '(no route)';
    const durationMs = Math.round(reply.elapsedTime * 10) / 10;
    recordHttpRequest(request.method, route, reply.statusCode, reply.elapsedTime / 1000);
    accessLog.info({ method: request.method, route, status: reply.statusCode, durationMs, traceId: request.traceId }, 'request');
  });

  app.setErrorHandler(async (err, request, reply) => {
    let domain = domainErrorOf(err);
    const spec = routeConfigOf(request)?.spec;
    if (domain && spec && !request.handlerStarted && isBodyRefusal(err)) {
      request.handlerStarted = true;
      request.rawBody ??= UNREAD_BODY;
      try {
        return sendResult(request, reply, await refusedBody(spec, request, reply, domain));
      } catch (e) {
        err = e as Error;
        domain = domainErrorOf(e);
      }
    }
    if (domain) return sendProblem(reply, request, domain);
    httpLog.error({ err, method: request.method, route: request.routeOptions.url, traceId: request.traceId }, 'unhandled error');
    return sendProblem(reply, request, new DomainError('internal'));
  });
  app.setNotFoundHandler((request, reply) => sendProblem(reply, request, new DomainError('not_found', `No route for ${request.method} ${request.url.split('?')[0]}.`)));

  /** What every request passes before its route runs: admission, its credential, the credential's rate limit and its rights. */
  const admitRequest = async (spec: RouteSpec, request: FastifyRequest, reply: FastifyReply): Promise<Principal | undefined> => {
    pipeline.admit?.(spec, request, reply);
    let principal: Principal | undefined;
    if (!('anonymous' in spec.auth)) {
      // Node keeps the first of several Authorization headers; which credential was meant is not known.
      if (countHeader(request.raw.rawHeaders, 'authorization') > 1) throw new DomainError('unauthenticated', 'Send one Authorization header.');
      const token = parseBearer(request.headers.authorization);
      if (!token) throw new DomainError('unauthenticated', 'Send "Authorization: Bearer <credential>".');
      pipeline.beforeAuthentication?.(request, reply);
      try {
        principal = await authenticator.authenticate(token);
      } catch (e) {
        if (e instanceof DomainError && e.code === 'unauthenticated') pipeline.authenticationFailed?.(request);
        throw e;
      }
      request.principal = principal;
    }
    await pipeline.limitRate?.(request, principal, reply);
    authorize(principal, spec.auth);
    return principal;
  };

  /**
   * A body refused before its route ran (malformed JSON, not UTF-8, text no service may store,
   * over the size limit, not JSON) is refused before authentication, so garbage costs no credential
   * lookup. On a route that takes an Idempotency-Key, sent with one by a credential that may call
   * it, the refusal is also that key's 4xx outcome, as a body failing its schema is (idempotency
   * rules 4 and 6: the same key with the same body runs again, with a different body it is 409),
   * so a client that fixes its request under the same key is told to use a new one rather than
   * having it run. A credential that fails, or may not call the route, gets the refusal as it is;
   * a rate limit still answers 429.
   */
  const refusedBody = async (spec: RouteSpec, request: FastifyRequest, reply: FastifyReply, refusal: DomainError): Promise<RouteResult> => {
    if (spec.invalidBody && (refusal.code === 'validation_failed' || refusal.code === 'bad_request')) {
      // A route whose 400 is not a problem answers its own body; the caller's credential, when it
      // passes, lets that answer name what the credential holds (a checkout's returnUrl).
      let principal: Principal | undefined;
      try {
        principal = await admitRequest(spec, request, reply);
      } catch (e) {
        if (e instanceof DomainError && (e.code === 'rate_limited' || e.code === 'account_locked')) throw e;
      }
      return spec.invalidBody(refusal, principal);
    }
    if (!spec.idempotent || !pipeline.runIdempotent || request.headers['idempotency-key'] === undefined) throw refusal;
    let principal: Principal | undefined;
    try {
      principal = await admitRequest(spec, request, reply);
    } catch (e) {
      if (e instanceof DomainError && (e.code === 'rate_limited' || e.code === 'account_locked')) throw e;
      throw refusal;
    }
    return pipeline.runIdempotent(spec, request, principal, async () => {
      throw refusal;
    });
  };

  const register = (spec: RouteSpec) => {
    const queryNames = queryNamesOf(spec.query);
    app.route({
      method: spec.method,
      url: spec.url,
      config: { spec } satisfies RouteConfig as object,
      handler: async (request, reply) => {
        request.handlerStarted = true;
        // Text no service may store is refused first, like malformed JSON: before a credential
        // costs a lookup (and, with an Idempotency-Key, as its outcome: `refusedBody`).
        assertUtf8Query(request.url);
        try {
          assertStorableText({ query: request.query, params: request.params, body: request.body }, bodyMaxDepth);
        } catch (e) {
          if (e instanceof DomainError) return sendResult(request, reply, await refusedBody(spec, request, reply, e));
          throw e;
        }
        const principal = await admitRequest(spec, request, reply);

        const run = async (): Promise<RouteResult> => {
          const params = parse(spec.params, request.params);
          const query = parse(spec.query, canonicalQuery(queryNames, request.query));
          let body: unknown;
          try {
            // No body is the empty object (the parser answers undefined for it); a JSON `null` is a
            // body, and one no object schema accepts: 400 naming "$", not an empty update.
            body = spec.body ? parse(spec.body, request.body === undefined ? {} : request.body) : undefined;
          } catch (e) {
            if (spec.invalidBody && e instanceof DomainError && e.code === 'validation_failed') return spec.invalidBody(e, principal);
            throw e;
          }
          const ctx: RouteContext<any, any, any> = {
            params,
            query,
            body,
            principal: principal!,
            request,
            reply,
          };
          return spec.handler(ctx);
        };
        let result: RouteResult;
        try {
          result = spec.idempotent && pipeline.runIdempotent ? await pipeline.runIdempotent(spec, request, principal, run) : await run();
        } catch (e) {
          if (e instanceof DomainError) pipeline.failed?.(request, e);
          throw e;
        }
        if (result.status >= 200 && result.status < 300) pipeline.succeeded?.(request);
        return sendResult(request, reply, result);
      },
    });
  };
  return { app, register };
}

function sendResult(request: FastifyRequest, reply: FastifyReply, result: RouteResult): FastifyReply {
  if (result.headers) reply.headers(result.headers);
  // Every 503 says when to try again, as sendProblem's do: also one returned as a result (the
  // replay of an idempotent request whose first attempt ended 503).
  if (result.status === 503 && !reply.hasHeader('retry-after')) reply.header('retry-after', '1');
  reply.code(result.status);
  if (result.body === undefined || result.status === 204) return reply.send();
  if (result.status >= 400 && isObject(result.body)) result.body.traceId ??= request.traceId;
  return reply.type(result.contentType ?? (result.status >= 400 ? PROBLEM_CONTENT_TYPE : 'application/json; charset=utf-8')).send(JSON.stringify(result.body));
}

function parse(schema: import('zod').ZodType | undefined, value: unknown): unknown {
  if (!schema) return value;
  const r = schema.safeParse(value);
  if (!r.success) throw DomainError.validation(fieldErrorsOf(r.error));
  return r.data;
}

/** A route's query parameter names by their lower-case form (once per route), or undefined when its query is not an object schema. */
function queryNamesOf(schema: import('zod').ZodType | undefined): Map<string, string> | undefined {
  if (!schema || !('shape' in schema) || !isObject(schema.shape)) return undefined;
  return new Map(Object.keys(schema.shape).map((n) => [n.toLowerCase(), n]));
}

/**
 * Query parameter names match case-insensitively, as paths do (the original binds them so):
 * `PageSize=10&Status=Active` is `pageSize=10&status=Active`, not two ignored names and an
 * unfiltered list. Two spellings of one name count as the parameter given twice (400).
 */
function canonicalQuery(names: Map<string, string> | undefined, query: unknown): unknown {
  if (!names || !isObject(query)) return query;
  const out: Record<string, unknown> = Object.create(null);
  const twice: Record<string, string[]> = {};
  for (const [key, value] of Object.entries(query)) {
    const name = names.get(key.toLowerCase()) ?? key;
    out[name] = name in out ? ([] as unknown[]).concat(out[name], value) : value;
    // Every parameter takes one value: said as such, not as the value's check failing on a list.
    if (Array.isArray(out[name]) && names.has(name.toLowerCase())) twice[name] = ['Must be given once.'];
  }
  if (Object.keys(twice).length > 0) throw DomainError.validation(twice);
  return out;
}

/** The trace id of a valid W3C `traceparent` header (version 00), or undefined. */
function traceIdOf(header: string | string[] | undefined): string | undefined {
  const m = typeof header === 'string' ? /^00-([0-9a-f]{32})-[0-9a-f]{16}-[0-9a-f]{2}$/.exec(header.trim()) : null;
  return m && !/^0+$/.test(m[1]!) ? m[1] : undefined;
}

function isObject(v: unknown): v is Record<string, unknown> {
  return typeof v === 'object' && v !== null && !Array.isArray(v);
}

/**
 * Answers errors of Node's HTTP parser (fastify's `clientErrorHandler`), raised before any
 * route, hook or reply exists: header section over the limit (431), bytes no HTTP header may
 * hold, a malformed request line (400), a request not received in time (408). Written raw to
 * the socket as problem details with a fresh trace id, then the connection is closed (the
 * parser cannot find the next request on it).
 */
export function answerClientError(err: Error & { code?: string }, socket: Duplex): void {
  if (err.code === 'ECONNRESET' || !socket.writable) {
    socket.destroy();
    return;
  }
  let e: DomainError;
  let status: number;
  if (err.code === 'HPE_HEADER_OVERFLOW') {
    [e, status] = [new DomainError('header_fields_too_large', 'The request header section exceeds the size limit.'), 431];
  } else if (err.code === 'ERR_HTTP_REQUEST_TIMEOUT') {
    [e, status] = [new DomainError('request_timeout', 'The request was not received in time.'), 408];
  } else {
    [e, status] = [new DomainError('bad_request', 'The request could not be parsed: malformed request line or header.'), 400];
  }
  socket.end(rawProblemResponse(e, status));
}

const REASONS: Record<number, string> = { 400: 'Bad Request', 408: 'Request Timeout', 429: 'Too Many Requests', 431: 'Request Header Fields Too Large' };

/**
 * A whole HTTP/1.1 response of problem details for `e`, with a fresh trace id and the security
 * headers, that closes the connection: for answers written to a socket before any request
 * object exists (`answerClientError`, the connection cap). `headers`: more header lines.
 */
export function rawProblemResponse(e: DomainError, status: number, headers: Record<string, string> = {}): string {
  const traceId = randomBytes(16).toString('hex');
  const body = JSON.stringify({ ...problemOf(e, undefined, status), traceId });
  return (
    `HTTP/1.1 ${status} ${REASONS[status]}\r\n` +
    `Content-Type: ${PROBLEM_CONTENT_TYPE}\r\n` +
    `Content-Length: ${Buffer.byteLength(body)}\r\n` +
    `${TRACE_ID_HEADER}: ${traceId}\r\n` +
    Object.entries(headers).map(([name, value]) => `${name}: ${value}\r\n`).join('') +
    'X-Content-Type-Options: nosniff\r\n' +
    'Cache-Control: no-store\r\n' +
    'Connection: close\r\n\r\n' +
    body
  );
}
