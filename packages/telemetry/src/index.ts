import { context, propagation, trace, SpanKind, SpanStatusCode, type Context, type Span } from '@opentelemetry/api';
import { W3CTraceContextPropagator } from '@opentelemetry/core';
import { OTLPTraceExporter } from '@opentelemetry/exporter-trace-otlp-http';
import { resourceFromAttributes } from '@opentelemetry/resources';
import { AlwaysOffSampler, BatchSpanProcessor, ConsoleSpanExporter, ParentBasedSampler, type SpanProcessor } from '@opentelemetry/sdk-trace-base';
import { NodeTracerProvider } from '@opentelemetry/sdk-trace-node';
import { ATTR_SERVICE_NAME } from '@opentelemetry/semantic-conventions';

export { SpanKind, SpanStatusCode, context, trace };
export type { Context, Span };

let provider: NodeTracerProvider | undefined;

/**
 * Starts tracing for one process. Spans are exported over OTLP/HTTP when
 * `OTEL_EXPORTER_OTLP_ENDPOINT` is set, printed when `OTEL_TRACES_EXPORTER=console`, and
 * otherwise only created (so trace ids still flow through headers and logs).
 */
export function startTelemetry(serviceName: string): void {
  if (provider || process.env.OTEL_SDK_DISABLED === 'true') return;
  const spanProcessors: SpanProcessor[] = [];
  if (process.env.OTEL_EXPORTER_OTLP_ENDPOINT) spanProcessors.push(new BatchSpanProcessor(new OTLPTraceExporter()));
  if (process.env.OTEL_TRACES_EXPORTER === 'console') spanProcessors.push(new BatchSpanProcessor(new ConsoleSpanExporter()));
  provider = new NodeTracerProvider({
    resource: resourceFromAttributes({ [ATTR_SERVICE_NAME]: serviceName }),
    spanProcessors,
    // With nowhere to export, spans need not record (which costs on every request); trace ids
    // are still minted and propagated, so logs and problem details stay correlated. An explicit
    // OTEL_TRACES_SAMPLER wins.
    ...(spanProcessors.length === 0 && !process.env.OTEL_TRACES_SAMPLER ? { sampler: new ParentBasedSampler({ root: new AlwaysOffSampler() }) } : {}),
  });
  provider.register({ propagator: new W3CTraceContextPropagator() });
}

export async function stopTelemetry(): Promise<void> {
  await provider?.shutdown().catch(() => undefined);
  provider = undefined;
}

export function tracer(name = 'billing-platform') {
  return trace.getTracer(name);
}

/** Writes `traceparent`/`tracestate` of the active (or given) context into a header carrier. */
export function injectTraceHeaders(carrier: Record<string, string> = {}, ctx: Context = context.active()): Record<string, string> {
  propagation.inject(ctx, carrier);
  return carrier;
}

/** The context described by `traceparent`/`tracestate` headers, on top of the active one. */
export function extractTraceContext(carrier: Record<string, string | undefined>): Context {
  return propagation.extract(context.active(), carrier);
}

export function currentTraceId(): string | undefined {
  const id = trace.getActiveSpan()?.spanContext().traceId;
  return id && id !== '00000000000000000000000000000000' ? id : undefined;
}

/** Runs `fn` inside a span, recording an exception and error status when it throws. */
export async function withSpan<T>(
  name: string,
  opts: { kind?: SpanKind; parent?: Context; attributes?: Record<string, string | number | boolean> },
  fn: (span: Span) => Promise<T>,
): Promise<T> {
  const parent = opts.parent ?? context.active();
  const span = tracer().startSpan(name, { kind: opts.kind ?? SpanKind.INTERNAL, attributes: opts.attributes }, parent);
  return context.with(trace.setSpan(parent, span), async () => {
    try {
      return await fn(span);
    } catch (e) {
      span.recordException(e as Error);
      span.setStatus({ code: SpanStatusCode.ERROR });
      throw e;
    } finally {
      span.end();
    }
  });
}
