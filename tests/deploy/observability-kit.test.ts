import { readdirSync, readFileSync } from 'node:fs';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { join, resolve } from 'node:path';
import { BaseConfig } from '@billing/service-runtime/process';
import {
  observeGauge,
  recordBillingRun,
  recordCharge,
  recordHttpRequest,
  recordIdempotencyReplay,
  recordRateLimitRejection,
  recordRpcCall,
  recordWebhookAttempt,
  serveMetrics,
  startTelemetry,
  stopTelemetry,
} from '@billing/telemetry';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { parse } from 'yaml';
import { dashboardQueries, metricNames, samplesOf } from '../support/grafana-dashboard.js';

/**
 * docker-compose's Prometheus and Grafana, checked without a Docker engine: Prometheus scrapes
 * each service's operations listener (METRICS_PORT, which compose opens to the network with
 * METRICS_HOST), and every metric the Grafana dashboard queries is one the services export,
 * under the name the Prometheus exporter gives it (no unit suffix: `http_server_request_duration`,
 * not `..._seconds`). A wrong name draws an empty panel and no error anywhere.
 * `tests/e2e/metrics.test.ts` checks the dashboard's labels against a running platform.
 */
const root = resolve(import.meta.dirname, '../..');

function interpolate(text: string): string {
  return text.replace(/\$\{([A-Z0-9_]+)(?::?([-?])([^}]*))?\}/g, (_m, name: string, op?: string, arg?: string) => (op === '-' ? (arg ?? '') : `set-${name.toLowerCase()}`));
}

type ComposeService = { build?: { args?: Record<string, string> }; command?: unknown; environment?: Record<string, string> };
const compose = parse(interpolate(readFileSync(join(root, 'docker-compose.yml'), 'utf8')), { merge: true }) as { services: Record<string, ComposeService> };
const prometheus = parse(readFileSync(join(root, 'deploy/prometheus.yml'), 'utf8')) as { scrape_configs: { job_name: string; metrics_path?: string; static_configs: { targets: string[] }[] }[] };
const targets = prometheus.scrape_configs.flatMap((c) => c.static_configs.flatMap((s) => s.targets.map((t) => ({ job: c.job_name, path: c.metrics_path ?? '/metrics', host: t.split(':')[0]!, port: Number(t.split(':')[1]) }))));
/** The platform's own services: built from this repository's Dockerfile, long-running (the grpc-certs job has a command). */
const platformServices = Object.entries(compose.services).filter(([, s]) => s.build?.args?.SERVICE && s.command === undefined);
const DEFAULT_METRICS_PORT = BaseConfig.parse({}).METRICS_PORT;

describe('deploy/prometheus.yml', () => {
  it('scrapes every platform service of docker-compose.yml', () => {
    expect(platformServices.length).toBeGreaterThanOrEqual(6);
    expect(targets.map((t) => t.host).sort()).toEqual(platformServices.map(([name]) => name).sort());
  });

  it.each(platformServices.map(([name]) => name))('scrapes %s on its operations listener, which compose opens to the Prometheus container', (name) => {
    const env = compose.services[name]!.environment ?? {};
    const target = targets.find((t) => t.host === name)!;
    expect(target.path).toBe('/metrics');
    // The gateway's public PORT answers 404 on /metrics: metrics are on METRICS_PORT only.
    expect(target.port, `${name}: prometheus.yml scrapes port ${target.port}`).toBe(Number(env.METRICS_PORT ?? DEFAULT_METRICS_PORT));
    // METRICS_HOST defaults to 127.0.0.1, which another container cannot reach.
    expect(env.METRICS_HOST, `${name}: METRICS_HOST in docker-compose.yml`).toBe('0.0.0.0');
  });
});

describe('the gateway container', () => {
  it('listens on every interface: HOST=0.0.0.0 in docker-compose.yml and the image (the service defaults to 127.0.0.1)', () => {
    expect(compose.services.gateway?.environment?.HOST).toBe('0.0.0.0');
    expect(readFileSync(join(root, 'Dockerfile'), 'utf8')).toMatch(/^\s*HOST=0\.0\.0\.0\b/m);
  });
});

/** Names of the gauges services register with `observeGauge('<name>', …)` (their values need a database or NATS). */
function gaugesInSource(): string[] {
  const names = new Set<string>();
  for (const dir of ['packages', 'services']) {
    for (const file of readdirSync(join(root, dir), { recursive: true, encoding: 'utf8' })) {
      if (!/\/src\/.*\.ts$/.test(file) || file.endsWith('.test.ts') || file.includes('node_modules')) continue;
      for (const m of readFileSync(join(root, dir, file), 'utf8').matchAll(/observeGauge\(\s*'([^']+)'/g)) names.add(m[1]!);
    }
  }
  return [...names];
}

describe('deploy/grafana dashboard', () => {
  let server: Server;
  let exported: Map<string, Set<string>>;

  beforeAll(async () => {
    // Every instrument of @billing/telemetry, once, exported by the Prometheus exporter the services use.
    await startTelemetry('deploy-kit');
    recordHttpRequest('GET', '/health', 200, 0.001);
    recordRpcCall('billing.v1.Subscriptions', 'Get', 'OK', 0.001);
    recordWebhookAttempt('succeeded', 200, 0.01, 'subscription.created');
    recordBillingRun('succeeded', 1);
    recordCharge('succeeded');
    recordRateLimitRejection('credential');
    recordIdempotencyReplay('POST');
    const gauges = gaugesInSource();
    expect(gauges.length).toBeGreaterThanOrEqual(2);
    for (const name of gauges) observeGauge(name, '1', name, () => 0);
    server = createServer(serveMetrics);
    await new Promise<void>((done) => server.listen(0, '127.0.0.1', done));
    const text = await (await fetch(`http://127.0.0.1:${(server.address() as AddressInfo).port}/metrics`)).text();
    exported = samplesOf([text]);
  });

  afterAll(async () => {
    await new Promise((done) => server?.close(done));
    await stopTelemetry();
  });

  it('queries only metrics the services export', () => {
    const queries = dashboardQueries();
    expect(queries.length).toBeGreaterThanOrEqual(8);
    const unknown = queries.flatMap((q) => metricNames(q.expr).filter((name) => !exported.has(name)).map((name) => `${q.panel}: ${name}`));
    expect(unknown, `exported: ${[...exported.keys()].join(', ')}`).toEqual([]);
  });

  it('reads metric names out of PromQL', () => {
    expect(metricNames('histogram_quantile(0.95, sum by (le, rpc_service) (rate(rpc_server_call_duration_bucket{job="x"}[5m])))')).toEqual(['rpc_server_call_duration_bucket']);
    expect(metricNames('max by (job) (outbox_lag) / on (job) group_left up')).toEqual(['outbox_lag', 'up']);
  });
});
