import type { IncomingMessage, ServerResponse } from 'node:http';
import { metrics, type Attributes, type Counter, type Histogram, type Meter, type ObservableResult } from '@opentelemetry/api';
import { PrometheusExporter } from '@opentelemetry/exporter-prometheus';
import { resourceFromAttributes } from '@opentelemetry/resources';
import { MeterProvider } from '@opentelemetry/sdk-metrics';
import { ATTR_SERVICE_NAME } from '@opentelemetry/semantic-conventions';
import { startRuntimeMetrics, stopRuntimeMetrics } from './runtime-metrics.js';

let exporter: PrometheusExporter | undefined;
let provider: MeterProvider | undefined;

/** Started by `startTelemetry`: metrics are kept in memory and read by scraping `/metrics`. */
export function startMetrics(serviceName: string): void {
  if (provider) return;
  exporter = new PrometheusExporter({ preventServerStart: true });
  provider = new MeterProvider({ resource: resourceFromAttributes({ [ATTR_SERVICE_NAME]: serviceName }), readers: [exporter] });
  metrics.setGlobalMeterProvider(provider);
  // Counters are reported (at 0) before their first event, so dashboards and alerts see them.
  for (const name of PRIMED_COUNTERS[serviceName] ?? []) counter(name).add(0);
  startRuntimeMetrics(meter());
}

export async function stopMetrics(): Promise<void> {
  stopRuntimeMetrics();
  await provider?.shutdown().catch(() => undefined);
  provider = undefined;
  exporter = undefined;
}

/** Answers a scrape with every metric of this process in the Prometheus text format. */
export function serveMetrics(req: IncomingMessage, res: ServerResponse): void {
  if (!exporter) {
    res.statusCode = 200;
    res.setHeader('content-type', 'text/plain; version=0.0.4');
    res.end('# telemetry is disabled (OTEL_SDK_DISABLED)\n');
    return;
  }
  exporter.getMetricsRequestHandler(req, res);
}

/** The meter of the platform's own metrics (the global provider's; a no-op one when telemetry is off). */
export function meter(): Meter {
  return metrics.getMeter('billing-platform');
}

/** Request durations of every service share these bucket bounds (seconds). */
export const DURATION_BUCKETS_SECONDS = [0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10];

/** Instruments are created on first use (after `startTelemetry` has set the provider). */
function lazy<T>(make: () => T): () => T {
  let value: T | undefined;
  return () => (value ??= make());
}

const httpDuration = lazy(() =>
  meter().createHistogram('http.server.request.duration', { unit: 's', description: 'Duration of HTTP requests served, by method, route and status.', advice: { explicitBucketBoundaries: DURATION_BUCKETS_SECONDS } }),
);
const rpcDuration = lazy(() =>
  meter().createHistogram('rpc.server.call.duration', { unit: 's', description: 'Duration of gRPC calls served, by service, method and status.', advice: { explicitBucketBoundaries: DURATION_BUCKETS_SECONDS } }),
);
const counters = new Map<string, Counter>();

const DESCRIPTIONS = {
  'webhook.deliveries': 'Webhook delivery attempts, by outcome and HTTP status.',
  'billing.runs': 'Billing runs, by outcome.',
  'billing.charges': 'Charges attempted, by outcome.',
  'gateway.rate_limit.rejections': 'Requests refused with 429 by the rate limiter.',
  'gateway.idempotency.replays': 'Requests answered by replaying a stored idempotent outcome.',
} as const;
type CounterName = keyof typeof DESCRIPTIONS;

/** Counters each service reports from its start. */
const PRIMED_COUNTERS: Record<string, CounterName[]> = {
  webhooks: ['webhook.deliveries'],
  billing: ['billing.runs', 'billing.charges'],
  gateway: ['gateway.rate_limit.rejections', 'gateway.idempotency.replays'],
};
const histograms = new Map<string, Histogram>();

function counter(name: CounterName): Counter {
  let c = counters.get(name);
  if (!c) counters.set(name, (c = meter().createCounter(name, { description: DESCRIPTIONS[name] })));
  return c;
}

function histogram(name: string, unit: string, description: string): Histogram {
  let h = histograms.get(name);
  if (!h) histograms.set(name, (h = meter().createHistogram(name, { unit, description, advice: { explicitBucketBoundaries: DURATION_BUCKETS_SECONDS } })));
  return h;
}

/** One HTTP request served (the gateway, the sandbox provider): rate, errors (status ≥ 500) and duration. */
export function recordHttpRequest(method: string, route: string, status: number, durationSeconds: number): void {
  httpDuration().record(durationSeconds, { 'http.request.method': method, 'http.route': route, 'http.response.status_code': status });
}

/** One gRPC call served. `code` is the gRPC status name (OK, NOT_FOUND, INTERNAL, …). */
export function recordRpcCall(service: string, method: string, code: string, durationSeconds: number): void {
  rpcDuration().record(durationSeconds, { 'rpc.system': 'grpc', 'rpc.service': service, 'rpc.method': method, 'rpc.grpc.status_code': code });
}

/** A webhook delivery attempt: its outcome (`succeeded`; `http_error`, a non-2xx answer; `failed`, no answer) and HTTP status (0 when none). */
export function recordWebhookAttempt(outcome: string, statusCode: number | null, durationSeconds: number, eventType: string): void {
  const attrs = { outcome, 'http.response.status_code': statusCode ?? 0, 'event.type': eventType };
  counter('webhook.deliveries').add(1, attrs);
  histogram('webhook.delivery.duration', 's', 'Duration of webhook delivery attempts.').record(durationSeconds, { outcome, 'event.type': eventType });
}

/** A billing run (one pass over the charges that are due): `succeeded` or `failed`. */
export function recordBillingRun(outcome: 'succeeded' | 'failed', durationSeconds: number, attributes: Attributes = {}): void {
  counter('billing.runs').add(1, { outcome, ...attributes });
  histogram('billing.run.duration', 's', 'Duration of billing runs.').record(durationSeconds, { outcome, ...attributes });
}

/** Charges attempted by billing (`count` of them) with one outcome: `succeeded`, `failed`, … */
export function recordCharge(outcome: string, count = 1, attributes: Attributes = {}): void {
  if (count > 0) counter('billing.charges').add(count, { outcome, ...attributes });
}

/** A request refused by the gateway's rate limiter. `scope` says which limit (`merchant`, `anonymous`, …). */
export function recordRateLimitRejection(scope: string): void {
  counter('gateway.rate_limit.rejections').add(1, { scope });
}

/** A request answered from a stored idempotent outcome instead of being run again. */
export function recordIdempotencyReplay(method: string): void {
  counter('gateway.idempotency.replays').add(1, { 'http.request.method': method });
}

/**
 * A gauge read at scrape time. `observe` returns the value (or values with attributes); when it
 * throws or returns undefined nothing is reported for that scrape.
 */
export function observeGauge(name: string, unit: string, description: string, observe: () => Promise<number | { value: number; attributes: Attributes }[] | undefined> | number | undefined): void {
  const gauge = meter().createObservableGauge(name, { unit, description });
  gauge.addCallback(async (result: ObservableResult) => {
    const v = await Promise.resolve()
      .then(observe)
      .catch(() => undefined);
    if (v === undefined) return;
    if (typeof v === 'number') result.observe(v);
    else for (const { value, attributes } of v) result.observe(value, attributes);
  });
}
