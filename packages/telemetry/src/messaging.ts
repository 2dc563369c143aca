import { ROOT_CONTEXT, SpanKind, trace } from '@opentelemetry/api';
import { extractTraceContext, injectTraceHeaders, propagatesContextManually, tracer, withSpan, type Span } from './tracing.js';

/** Attributes of a NATS message span (OpenTelemetry semantic conventions for messaging). */
function natsAttributes(operation: 'publish' | 'process', subject: string, messageId: string, consumerGroup?: string) {
  return {
    'messaging.system': 'nats',
    'messaging.operation.name': operation,
    'messaging.operation.type': operation === 'publish' ? 'send' : 'process',
    'messaging.destination.name': subject,
    'messaging.message.id': messageId,
    ...(consumerGroup ? { 'messaging.consumer.group.name': consumerGroup } : {}),
  };
}

/** The W3C trace context of `stored` (and nothing else it may hold). */
function w3cHeaders(stored: Record<string, string>): Record<string, string> {
  const out: Record<string, string> = {};
  if (stored.traceparent) out.traceparent = stored.traceparent;
  if (stored.tracestate) out.tracestate = stored.tracestate;
  return out;
}

/**
 * Publishes one message in a PRODUCER span `publish <subject>` that continues the trace in
 * `stored` (the `traceparent`/`tracestate` recorded with the message, e.g. on its outbox row).
 * `send` receives the headers to publish with: the producer span's trace context. When spans
 * are not recorded (`propagatesContextManually`) there is no span (a relay publishes thousands
 * a second, and the span cost more than the rest of the publish): `send` gets `stored` itself,
 * so consumers still continue the same trace.
 */
export function publishMessage<T>(subject: string, messageId: string, stored: Record<string, string> | null | undefined, send: (traceHeaders: Record<string, string>) => Promise<T>): Promise<T> {
  if (propagatesContextManually()) return send(w3cHeaders(stored ?? {}));
  return withSpan(
    `publish ${subject}`,
    { kind: SpanKind.PRODUCER, parent: extractTraceContext(stored ?? {}, ROOT_CONTEXT), attributes: natsAttributes('publish', subject, messageId) },
    () => send(injectTraceHeaders()),
  );
}

/**
 * Handles one received message in a CONSUMER span `process <subject>` whose parent is the
 * producer span named by the message's `traceparent` header.
 */
export function processMessage<T>(
  subject: string,
  messageId: string,
  headers: Record<string, string | undefined>,
  consumerGroup: string,
  handle: (span: Span) => Promise<T>,
): Promise<T> {
  return withSpan(
    `process ${subject}`,
    { kind: SpanKind.CONSUMER, parent: extractTraceContext(headers, ROOT_CONTEXT), attributes: natsAttributes('process', subject, messageId, consumerGroup) },
    handle,
  );
}

/**
 * Starts (and returns, for the caller to end) the CONSUMER span of one message handled as part
 * of a batch, parented to the producer span named by its `traceparent` header. When spans are
 * not recorded and the message names a trace, the span is a non-recording one carrying that
 * trace context as is, so work it starts (`traceHeadersOf`) continues the producer's trace.
 */
export function startProcessSpan(subject: string, messageId: string, headers: Record<string, string | undefined>, consumerGroup: string): Span {
  if (propagatesContextManually()) {
    const remote = trace.getSpanContext(extractTraceContext(headers, ROOT_CONTEXT));
    if (remote) return trace.wrapSpanContext(remote);
  }
  return tracer().startSpan(
    `process ${subject}`,
    { kind: SpanKind.CONSUMER, attributes: natsAttributes('process', subject, messageId, consumerGroup) },
    extractTraceContext(headers, ROOT_CONTEXT),
  );
}

/** The `traceparent`/`tracestate` naming `span`, to carry its trace on to later work. */
export function traceHeadersOf(span: Span): Record<string, string> {
  return injectTraceHeaders({}, trace.setSpan(ROOT_CONTEXT, span));
}
