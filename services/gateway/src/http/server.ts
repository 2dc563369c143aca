import Fastify, { type FastifyInstance, type FastifyReply, type FastifyRequest } from 'fastify';
import { DomainError, fieldErrorsOf } from '@billing/contracts';
import { currentTraceId, recordHttpRequest } from '@billing/telemetry';
import type { Logger } from '@billing/service-runtime';
import { authorize } from '../auth/access.js';
import type { Authenticator } from '../auth/authenticator.js';
import { parseBearer } from '../auth/bearer.js';
import type { Principal } from '../auth/principal.js';
import { HTTP_STATUS, problemOf, PROBLEM_CONTENT_TYPE } from './problem.js';
import type { RouteContext, RouteResult, RouteSpec } from './route.js';

export const BODY_LIMIT_BYTES = 1024 * 1024;

declare module 'fastify' {
  interface FastifyRequest {
    principal?: Principal;
    traceId?: string;
    /** The JSON body bytes exactly as received (idempotency fingerprints hash them). */
    rawBody?: Buffer;
  }
}

/**
 * Cross-cutting steps around every route, supplied by their own features: rate limiting runs
 * after authentication; idempotency wraps the handler of routes marked `idempotent`.
 */
export interface RequestPipeline {
  limitRate?(request: FastifyRequest, principal: Principal | undefined, reply: FastifyReply): Promise<void> | void;
  /** `run` parses the inputs and calls the handler, so validation failures are outcomes of the run. */
  runIdempotent?(spec: RouteSpec, request: FastifyRequest, principal: Principal | undefined, run: () => Promise<RouteResult>): Promise<RouteResult>;
}

export interface HttpServerOptions {
  logger: Logger;
  authenticator: Authenticator;
  pipeline?: RequestPipeline;
  /** fastify `trustProxy`: true, a hop count, or addresses/CIDRs of trusted proxies. */
  trustProxy?: boolean | number | string;
}

function sendProblem(reply: FastifyReply, request: FastifyRequest, e: DomainError, status = HTTP_STATUS[e.code]): FastifyReply {
  const retry = e.extensions.retryAfterSeconds;
  if (typeof retry === 'number') reply.header('retry-after', String(Math.max(1, Math.ceil(retry))));
  else if (status === 503) reply.header('retry-after', '1');
  const problem = problemOf(e, request.url.split('?')[0], status);
  problem.traceId ??= request.traceId;
  return reply.code(status).type(PROBLEM_CONTENT_TYPE).send(problem);
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

export function buildHttpServer(opts: HttpServerOptions): { app: FastifyInstance; register(spec: RouteSpec): void } {
  const { logger, authenticator, pipeline = {} } = opts;
  const httpLog = logger.child({ component: 'http' });
  const accessLog = logger.child({ component: 'access' });
  const app: FastifyInstance = Fastify({
    // No per-request child logger: fastify would build one for every request (a measurable
    // share of the hot path); errors are logged below with the request's trace id instead.
    logger: false,
    bodyLimit: BODY_LIMIT_BYTES,
    routerOptions: { caseSensitive: false, ignoreTrailingSlash: true, maxParamLength: 500 },
    // Only behind a known proxy may X-Forwarded-For name the client (it keys anonymous rate limits).
    trustProxy: (opts.trustProxy ?? false) as boolean,
  });

  // JSON parser that tolerates an empty body (POST /pause with a JSON content type) and marks
  // malformed JSON distinctly.
  app.removeAllContentTypeParsers();
  app.addContentTypeParser(/^application\/(?:[\w.+-]+\+)?json(?:\s*;.*)?$/i, { parseAs: 'buffer' }, (req, body: string | Buffer, done) => {
    req.rawBody = typeof body === 'string' ? Buffer.from(body) : body;
    const text = body.toString().trim();
    if (text === '') return done(null, undefined);
    try {
      done(null, JSON.parse(text));
    } catch {
      done(Object.assign(new Error('malformed JSON'), { code: 'MALFORMED_JSON', statusCode: 400 }), undefined);
    }
  });

  // The request's span is the HTTP server span of OpenTelemetry's http instrumentation (named
  // for the route by its fastify instrumentation), continuing any `traceparent`.
  app.addHook('onRequest', async (request) => {
    request.traceId = currentTraceId();
  });
  // One access-log line per request. The route template, never the URL: paths and query strings
  // can carry personal data.
  app.addHook('onResponse', async (request, reply) => {
    const route = request.routeOptions.url ?? '(no route)';
    const durationMs = Math.round(reply.elapsedTime * 10) / 10;
    recordHttpRequest(request.method, route, reply.statusCode, reply.elapsedTime / 1000);
    accessLog.info({ method: request.method, route, status: reply.statusCode, durationMs, traceId: request.traceId }, 'request');
  });

  app.setErrorHandler((err, request, reply) => {
    const domain = domainErrorOf(err);
    if (domain) return sendProblem(reply, request, domain);
    httpLog.error({ err, method: request.method, route: request.routeOptions.url, traceId: request.traceId }, 'unhandled error');
    return sendProblem(reply, request, new DomainError('internal'));
  });
  app.setNotFoundHandler((request, reply) => sendProblem(reply, request, new DomainError('not_found', `No route for ${request.method} ${request.url.split('?')[0]}.`)));

  const register = (spec: RouteSpec) => {
    app.route({
      method: spec.method,
      url: spec.url,
      handler: async (request, reply) => {
        let principal: Principal | undefined;
        if (!('anonymous' in spec.auth)) {
          const token = parseBearer(request.headers.authorization);
          if (!token) throw new DomainError('unauthenticated', 'Send "Authorization: Bearer <credential>".');
          principal = await authenticator.authenticate(token);
          request.principal = principal;
        }
        await pipeline.limitRate?.(request, principal, reply);
        authorize(principal, spec.auth);

        const run = async () => {
          const ctx: RouteContext<any, any, any> = {
            params: parse(spec.params, request.params),
            query: parse(spec.query, request.query),
            body: spec.body ? parse(spec.body, request.body ?? {}) : undefined,
            principal: principal!,
            request,
            reply,
          };
          return spec.handler(ctx);
        };
        const result = spec.idempotent && pipeline.runIdempotent ? await pipeline.runIdempotent(spec, request, principal, run) : await run();
        if (result.headers) reply.headers(result.headers);
        reply.code(result.status);
        if (result.body === undefined || result.status === 204) return reply.send();
        return reply.type(result.contentType ?? (result.status >= 400 ? PROBLEM_CONTENT_TYPE : 'application/json; charset=utf-8')).send(JSON.stringify(result.body));
      },
    });
  };
  return { app, register };
}

function parse(schema: import('zod').ZodType | undefined, value: unknown): unknown {
  if (!schema) return value;
  const r = schema.safeParse(value);
  if (!r.success) throw DomainError.validation(fieldErrorsOf(r.error));
  return r.data;
}
