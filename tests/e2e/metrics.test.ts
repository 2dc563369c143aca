import { randomUUID } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, inject, it } from 'vitest';
import { adminToken } from '../support/e2e.js';
import { dashboardQueries, labelNames, metricNames, SCRAPE_LABELS, samplesOf } from '../support/grafana-dashboard.js';
import { apiClient, type ApiClient } from '../support/fixtures.js';
import { webhookFixtures } from '../support/webhook-fixtures.js';
import { startWebhookReceiver, type WebhookReceiver } from '../support/webhook-receiver.js';

/**
 * Every service serves Prometheus metrics and liveness/readiness probes on its operations
 * listener; the gateway's readiness also reflects its backends.
 */
let api: ApiClient;
let receiver: WebhookReceiver;
const urls = () => inject('metricsUrls');

beforeAll(async () => {
  api = apiClient(inject('gatewayUrl'));
  receiver = await startWebhookReceiver();
  // Traffic through every hop: an API key (identity), members (billing), a delivered webhook.
  const fx = webhookFixtures(api, receiver, adminToken());
  const { merchantId, observer } = await fx.merchantWithObserver();
  await fx.configure(merchantId, observer, `/metrics/${randomUUID()}`);
  await fx.settle(merchantId, observer);
  expect((await api.get('/api/Merchants/me', { token: observer.key })).status).toBe(200);
});

afterAll(async () => {
  await receiver?.close();
});

async function scrape(service: string): Promise<string> {
  const res = await fetch(`${urls()[service]}/metrics`);
  expect(res.status).toBe(200);
  expect(res.headers.get('content-type')).toMatch(/^text\/plain/);
  return res.text();
}

/** Metric families (`# TYPE` lines) each service must expose after the traffic above. */
const EXPECTED: Record<string, string[]> = {
  gateway: ['http_server_request_duration histogram', 'gateway_rate_limit_rejections_total counter', 'gateway_idempotency_replays_total counter'],
  identity: ['rpc_server_call_duration histogram', 'outbox_lag gauge'],
  billing: ['rpc_server_call_duration histogram', 'outbox_lag gauge', 'billing_runs_total counter', 'billing_charges_total counter'],
  checkout: ['outbox_lag gauge'],
  webhooks: ['webhook_deliveries_total counter', 'webhook_delivery_duration histogram', 'nats_consumer_pending gauge'],
  'sandbox-provider': [],
};

describe('/metrics', () => {
  it.each(Object.keys(EXPECTED))('%s exposes its metrics in the Prometheus text format', async (service) => {
    if (!urls()[service]) return; // not built in this checkout
    const text = await scrape(service);
    const families = text.split('\n').filter((l) => l.startsWith('# TYPE ')).map((l) => l.slice(7));
    for (const family of EXPECTED[service]!) expect(families, text.slice(0, 3000)).toContain(family);
    expect(text).toContain(`service_name="${service}"`);
  });

  it('counts billing runs by outcome', async () => {
    // A run at a clock long past: nothing of the shared platform is due, but the run is counted.
    const run = await api.post('/api/admin/billing-runs', { asOf: '2000-01-01T00:00:00Z' }, { token: adminToken() });
    expect(run.status, JSON.stringify(run.body)).toBe(200);
    expect(await scrape('billing')).toMatch(/billing_runs_total\{[^}]*outcome="succeeded"[^}]*\} [1-9]/);
  });

  it('labels request durations by route and status, and webhook attempts by outcome', async () => {
    const gatewayText = await scrape('gateway');
    expect(gatewayText).toMatch(/http_server_request_duration_count\{[^}]*http_route="\/api\/Merchants\/me"[^}]*http_response_status_code="200"/);
    const webhooksText = await scrape('webhooks');
    expect(webhooksText).toMatch(/webhook_deliveries_total\{[^}]*outcome="succeeded"[^}]*http_response_status_code="204"/);
  });

  it('serves every metric and label the Grafana dashboard queries', async () => {
    // After the traffic above (a delivered webhook, a billing run) every metric has samples.
    const services = Object.keys(EXPECTED).filter((s) => urls()[s]);
    const exported = samplesOf(await Promise.all(services.map(scrape)));
    const problems = dashboardQueries().flatMap(({ panel, expr }) => {
      const names = metricNames(expr);
      const missing = names.filter((n) => !exported.has(n)).map((n) => `${panel}: no metric ${n}`);
      const labels = new Set(names.flatMap((n) => [...(exported.get(n) ?? [])]));
      // A counter primed at 0 has no labels until its first event (no charge on this platform yet).
      if (labels.size === 0) return missing;
      const unknownLabels = labelNames(expr).filter((l) => !SCRAPE_LABELS.has(l) && !labels.has(l)).map((l) => `${panel}: no label ${l} on ${names.join(', ')}`);
      return [...missing, ...unknownLabels];
    });
    expect(problems).toEqual([]);
  });
});

describe('health probes', () => {
  it.each(Object.keys(EXPECTED))('%s answers liveness and readiness', async (service) => {
    if (!urls()[service]) return;
    expect((await fetch(`${urls()[service]}/health/live`)).status).toBe(200);
    const ready = await fetch(`${urls()[service]}/health/ready`);
    const body = (await ready.json()) as { status: string };
    expect(ready.status, JSON.stringify(body)).toBe(200);
    expect(body.status).toBe('ready');
  });

  it('reports the gateway ready only with its database, NATS and every backend', async () => {
    const res = await api.get('/health/ready');
    expect(res.status, JSON.stringify(res.body)).toBe(200);
    expect(res.body.checks).toEqual({ postgres: 'ok', nats: 'ok', identity: 'ok', billing: 'ok', checkout: 'ok', webhooks: 'ok' });
    expect((await api.get('/health/live')).status).toBe(200);
  });
});
