import { randomBytes } from 'node:crypto';
import { createRequire, register } from 'node:module';
import { context, propagation, ROOT_CONTEXT, trace, SpanKind, SpanStatusCode, TraceFlags, type Context, type Span } from '@opentelemetry/api';
import { isTracingSuppressed, suppressTracing, W3CTraceContextPropagator } from '@opentelemetry/core';
import { registerInstrumentations } from '@opentelemetry/instrumentation';
import { resourceFromAttributes } from '@opentelemetry/resources';
import { AlwaysOffSampler, BatchSpanProcessor, ConsoleSpanExporter, ParentBasedSampler, type SpanProcessor } from '@opentelemetry/sdk-trace-base';
import { NodeTracerProvider } from '@opentelemetry/sdk-trace-node';
import { ATTR_SERVICE_NAME } from '@opentelemetry/semantic-conventions';
import { createAddHookMessageChannel } from 'import-in-the-middle';
import { installLeanAsyncResourceBind } from './async-resource-bind.js';
import { RedactingSpanExporter } from './redaction.js';
import { createInstrumentations, disabledInstrumentations } from './instrumentations.js';
import { startMetrics, stopMetrics } from './metrics.js';

export { ROOT_CONTEXT, SpanKind, SpanStatusCode, context, trace };
export type { Context, Span };

let provider: NodeTracerProvider | undefined;
let started = false;
let manualPropagation = false;

/**
 * Starts tracing and metrics for one process, and patches grpc-js, pg, fastify, http and undici
 * with OpenTelemetry's instrumentations. Must run, and be awaited, before any of those modules
 * is imported: a service's `main.ts` imports only this package statically and everything else
 * after it, with `await import(...)`.
 *
 * Spans are exported over OTLP/HTTP when `OTEL_EXPORTER_OTLP_ENDPOINT` (or
 * `OTEL_EXPORTER_OTLP_TRACES_ENDPOINT`) is set, printed when `OTEL_TRACES_EXPORTER=console`, and
 * otherwise not recorded: then trace context still flows through HTTP headers, gRPC metadata,
 * outbox rows, NATS headers and logs, carried by `propagatesContextManually` callers and the
 * undici instrumentation, at a fraction of the cost of instrumentations that record spans.
 * Also binds async resources without Node 20's deprecated accessor (`installLeanAsyncResourceBind`).
 */
export async function startTelemetry(serviceName: string): Promise<void> {
  installLeanAsyncResourceBind();
  if (started || process.env.OTEL_SDK_DISABLED === 'true') return;
  started = true;
  const spanProcessors: SpanProcessor[] = [];
  if (process.env.OTEL_EXPORTER_OTLP_ENDPOINT || process.env.OTEL_EXPORTER_OTLP_TRACES_ENDPOINT) {
    // Imported only when configured: the exporter and its transport are about 5 MB of RSS.
    const { OTLPTraceExporter } = await import('@opentelemetry/exporter-trace-otlp-http');
    spanProcessors.push(new BatchSpanProcessor(new RedactingSpanExporter(new OTLPTraceExporter())));
  }
  if (process.env.OTEL_TRACES_EXPORTER === 'console') spanProcessors.push(new BatchSpanProcessor(new RedactingSpanExporter(new ConsoleSpanExporter())));
  // A sampler choice means spans may be recorded even without an exporter (tests, processors).
  const recording = spanProcessors.length > 0 || Boolean(process.env.OTEL_TRACES_SAMPLER);
  // Not recording: HTTP and gRPC carry the context through this package's own few lines (see
  // `incomingContext`), not through instrumentations built to record spans.
  manualPropagation = !recording;

  // Recording: ES modules are patched through a loader hook; only the modules an instrumentation
  // asked for are wrapped (the message channel tells the hook which). Not recording, the one
  // instrumentation left (undici) listens on diagnostics channels, so no hook (and no loader
  // thread, 15-20 MB of memory per process) is needed.
  const hook = recording ? createAddHookMessageChannel() : undefined;
  if (hook) {
    // Except http and https: every importer gets their one CommonJS exports object, patched below
    // through require (patching it again through the hook would wrap `request` twice).
    hook.registerOptions.data.exclude = ['http', 'https'];
    register('import-in-the-middle/hook.mjs', import.meta.url, hook.registerOptions);
  }

  provider = new NodeTracerProvider({
    resource: resourceFromAttributes({ [ATTR_SERVICE_NAME]: serviceName }),
    spanProcessors,
    // With nowhere to export, spans need not record (which costs on every request); trace ids
    // are still minted and propagated, so logs and problem details stay correlated. An explicit
    // OTEL_TRACES_SAMPLER wins.
    ...(spanProcessors.length === 0 && !process.env.OTEL_TRACES_SAMPLER ? { sampler: new ParentBasedSampler({ root: new AlwaysOffSampler() }) } : {}),
  });
  provider.register({ propagator: new W3CTraceContextPropagator() });
  const disabled = disabledInstrumentations(process.env.OTEL_NODE_DISABLED_INSTRUMENTATIONS);
  registerInstrumentations({ tracerProvider: provider, instrumentations: createInstrumentations({ recording, disabled }) });
  if (recording) {
    const require = createRequire(import.meta.url);
    require('node:http');
    require('node:https');
  }
  startMetrics(serviceName);
  await hook?.waitForAllMessagesAcknowledged();
}

/**
 * True when spans are not recorded and this process therefore carries W3C trace context across
 * incoming HTTP requests and gRPC calls itself, with `incomingContext` and `injectTraceHeaders`,
 * instead of through OpenTelemetry's http and grpc instrumentations (which cost a third of the
 * gateway's CPU per request when they only propagate).
 */
export function propagatesContextManually(): boolean {
  return manualPropagation;
}

/**
 * The context an incoming request or call runs in: the caller's W3C `traceparent` (and
 * `tracestate`), else a new trace that is not sampled. `carrier` holds lower-case header or
 * metadata names.
 */
export function incomingContext(carrier: Record<string, unknown>): Context {
  const extracted = propagation.extract(ROOT_CONTEXT, carrier);
  if (trace.getSpanContext(extracted)) return extracted;
  return trace.setSpanContext(ROOT_CONTEXT, { traceId: randomHex(16), spanId: randomHex(8), traceFlags: TraceFlags.NONE, isRemote: false });
}

let idPool = Buffer.alloc(0);
let idOffset = 0;

/**
 * `bytes` random bytes as hex, cut from a pool refilled 4 KiB at a time (one system call per ~170
 * requests, not two per request): for ids minted on hot paths (trace and span ids here, the
 * sandbox provider's charge and token ids).
 */
export function randomHex(bytes: number): string {
  if (idOffset + bytes > idPool.length) {
    idPool = randomBytes(4096);
    idOffset = 0;
  }
  idOffset += bytes;
  return idPool.toString('hex', idOffset - bytes, idOffset);
}

export async function stopTelemetry(): Promise<void> {
  await provider?.shutdown().catch(() => undefined);
  await stopMetrics();
  provider = undefined;
  manualPropagation = false;
}

export function tracer(name = 'billing-platform') {
  return trace.getTracer(name);
}

/** Writes `traceparent`/`tracestate` of the active (or given) context into a header carrier. */
export function injectTraceHeaders(carrier: Record<string, string> = {}, ctx: Context = context.active()): Record<string, string> {
  propagation.inject(ctx, carrier);
  return carrier;
}

/** The context described by `traceparent`/`tracestate` headers, on top of the active (or given) one. */
export function extractTraceContext(carrier: Record<string, string | undefined>, base: Context = context.active()): Context {
  return propagation.extract(base, carrier);
}

export function currentTraceId(): string | undefined {
  const id = trace.getActiveSpan()?.spanContext().traceId;
  return id && id !== '00000000000000000000000000000000' ? id : undefined;
}

/**
 * Runs `fn` outside any trace: in a fresh context whose (never exported) parent is marked not
 * sampled, so nothing `fn` does records spans, here or in the services it calls (the
 * `traceparent` it propagates says "not sampled"). For background polling, which would
 * otherwise start a trace several times a second.
 */
export function untraced<T>(fn: () => T): T {
  const parent = trace.setSpanContext(ROOT_CONTEXT, { traceId: randomHex(16), spanId: randomHex(8), traceFlags: TraceFlags.NONE, isRemote: false });
  return context.with(parent, fn);
}

/**
 * Runs `fn` with its outgoing calls' spans suppressed (they still belong to the enclosing
 * trace's work, which records its own span): for bulk work that makes thousands of calls a
 * second, where a span per call would cost more than the calls and say nothing a summary does
 * not. Clients that bypass instrumentation check `spansSuppressed()`.
 */
export function withoutCallSpans<T>(fn: () => T): T {
  return context.with(suppressTracing(context.active()), fn);
}

/** Whether the active context suppresses spans (see `withoutCallSpans`). */
export function spansSuppressed(): boolean {
  return isTracingSuppressed(context.active());
}

/** Runs `fn` inside a span, recording an exception and error status when it throws. */
export async function withSpan<T>(
  name: string,
  opts: { kind?: SpanKind; parent?: Context; attributes?: Record<string, string | number | boolean>; links?: { context: ReturnType<Span['spanContext']> }[] },
  fn: (span: Span) => Promise<T>,
): Promise<T> {
  const parent = opts.parent ?? context.active();
  const span = tracer().startSpan(name, { kind: opts.kind ?? SpanKind.INTERNAL, attributes: opts.attributes, links: opts.links }, parent);
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
