import type { Instrumentation } from '@opentelemetry/instrumentation';
import { FastifyInstrumentation } from '@opentelemetry/instrumentation-fastify';
import { GrpcInstrumentation } from '@opentelemetry/instrumentation-grpc';
import { HttpInstrumentation } from '@opentelemetry/instrumentation-http';
import { PgInstrumentation } from '@opentelemetry/instrumentation-pg';
import { UndiciInstrumentation } from '@opentelemetry/instrumentation-undici';

/** Probes and scrapes: answered many times a minute, never worth a trace. */
const UNTRACED_PATHS = /^\/(?:health(?:\/.*)?|metrics)(?:\?|$)/;

/**
 * OpenTelemetry's own instrumentations of the libraries every hop goes through. Outgoing calls
 * and queries only record spans inside a trace (a request, an event being relayed or
 * delivered), so pools, polls and housekeeping start no traces of their own. Query parameters
 * are never recorded (pg's `enhancedDatabaseReporting` stays off).
 */
export function createInstrumentations(): Instrumentation[] {
  return [
    new HttpInstrumentation({
      ignoreIncomingRequestHook: (req) => UNTRACED_PATHS.test(req.url ?? ''),
      requireParentforOutgoingSpans: true,
    }),
    new UndiciInstrumentation({ requireParentforSpans: true }),
    new FastifyInstrumentation(),
    new GrpcInstrumentation({ ignoreGrpcMethods: ['Check', 'Watch'] }),
    new PgInstrumentation({ requireParentSpan: true, enhancedDatabaseReporting: false }),
  ];
}
