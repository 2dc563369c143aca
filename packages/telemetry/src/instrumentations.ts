import type { ClientRequest } from 'node:http';
import type { Span } from '@opentelemetry/api';
import type { Instrumentation } from '@opentelemetry/instrumentation';
import { FastifyInstrumentation } from '@opentelemetry/instrumentation-fastify';
import { GrpcInstrumentation } from '@opentelemetry/instrumentation-grpc';
import { HttpInstrumentation } from '@opentelemetry/instrumentation-http';
import { PgInstrumentation } from '@opentelemetry/instrumentation-pg';
import { UndiciInstrumentation } from '@opentelemetry/instrumentation-undici';

/** Probes and scrapes: answered many times a minute, never worth a trace. */
const UNTRACED_PATHS = /^\/(?:health(?:\/.*)?|metrics)(?:\?|$)/;

/** Every webhook delivery carries it (Standard Webhooks); nothing else the platform sends does. */
const WEBHOOK_SIGNATURE_HEADER = 'webhook-signature';

/**
 * A webhook delivery's span names its endpoint by origin only: the path (and query) of a
 * merchant's webhook URL often is its credential (`/hooks/catch/123/abc…`), and would otherwise
 * reach the trace backend with every delivery.
 */
function redactWebhookTarget(span: Span, request: ClientRequest): void {
  const host = request.getHeader('host') ?? request.host;
  const url = `${request.protocol}//${String(host)}/[webhook path]`;
  span.setAttributes({ 'http.url': url, 'url.full': url, 'http.target': '/[webhook path]', 'url.path': '/[webhook path]' });
}

/** The instrumentations this package knows, by the names `OTEL_NODE_DISABLED_INSTRUMENTATIONS` uses. */
export type InstrumentationName = 'http' | 'undici' | 'fastify' | 'grpc' | 'pg';

/**
 * Loaded even when spans are not recorded: undici's carries trace context on outgoing requests
 * (webhook deliveries; billing's payment-provider client sets its `traceparent` itself). Incoming HTTP and gRPC are then propagated by
 * `incomingContext`/`injectTraceHeaders` (see `propagatesContextManually`), and fastify's and
 * pg's instrumentations only ever add spans, so they would wrap every hook and query for nothing.
 */
const PROPAGATING: ReadonlySet<InstrumentationName> = new Set(['undici']);

/**
 * OpenTelemetry's own instrumentations of the libraries every hop goes through. Outgoing calls
 * and queries only record spans inside a trace (a request, an event being relayed or
 * delivered), so pools, polls and housekeeping start no traces of their own. Query parameters
 * are never recorded (pg's `enhancedDatabaseReporting` stays off).
 *
 * `recording` false (nowhere to export spans): only the propagating one. `disabled`: names an
 * operator turned off (`OTEL_NODE_DISABLED_INSTRUMENTATIONS`, as in OpenTelemetry's
 * auto-instrumentations for Node).
 */
export function createInstrumentations(opts: { recording: boolean; disabled?: ReadonlySet<string> }): Instrumentation[] {
  const all: Record<InstrumentationName, () => Instrumentation> = {
    http: () =>
      new HttpInstrumentation({
        ignoreIncomingRequestHook: (req) => UNTRACED_PATHS.test(req.url ?? ''),
        requireParentforOutgoingSpans: true,
        requestHook: (span, request) => {
          if ('getHeader' in request && request.getHeader(WEBHOOK_SIGNATURE_HEADER) !== undefined) redactWebhookTarget(span, request);
        },
      }),
    undici: () => new UndiciInstrumentation({ requireParentforSpans: true }),
    fastify: () => new FastifyInstrumentation(),
    grpc: () => new GrpcInstrumentation({ ignoreGrpcMethods: ['Check', 'Watch'] }),
    pg: () => new PgInstrumentation({ requireParentSpan: true, enhancedDatabaseReporting: false }),
  };
  return (Object.keys(all) as InstrumentationName[])
    .filter((name) => (opts.recording || PROPAGATING.has(name)) && !opts.disabled?.has(name))
    .map((name) => all[name]());
}

/** `OTEL_NODE_DISABLED_INSTRUMENTATIONS`: comma-separated names, case and spaces ignored. */
export function disabledInstrumentations(value: string | undefined): Set<string> {
  return new Set((value ?? '').split(',').map((s) => s.trim().toLowerCase()).filter(Boolean));
}
