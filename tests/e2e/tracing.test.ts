import { randomUUID } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { apiClient, eventually, type ApiClient } from '../support/fixtures.js';
import { SPAN_KIND, startOtlpReceiver, type OtlpReceiver, type ReceivedSpan } from '../support/otlp-receiver.js';
import { startTestPlatform, type TestPlatform } from '../support/platform.js';
import { memberEvent, webhookFixtures } from '../support/webhook-fixtures.js';
import { startWebhookReceiver, type WebhookReceiver } from '../support/webhook-receiver.js';

/**
 * One request, one trace: the services export spans over OTLP/HTTP to a receiver in this test,
 * and a `POST /api/Members` must be followed from the gateway through billing and its database,
 * the outbox relay's publish, the webhooks service's consume, to the webhook's HTTP delivery,
 * which carries the trace's `traceparent`.
 */
let platform: TestPlatform;
let api: ApiClient;
let otlp: OtlpReceiver;
let receiver: WebhookReceiver;
let fx: ReturnType<typeof webhookFixtures>;

beforeAll(async () => {
  otlp = await startOtlpReceiver();
  platform = await startTestPlatform({
    services: ['identity', 'billing', 'webhooks', 'gateway'],
    env: { OTEL_EXPORTER_OTLP_ENDPOINT: otlp.endpoint, OTEL_EXPORTER_OTLP_PROTOCOL: 'http/json', OTEL_BSP_SCHEDULE_DELAY: '100' },
    logLevel: 'info',
  });
  api = apiClient(platform.gatewayUrl!);
  receiver = await startWebhookReceiver();
  fx = webhookFixtures(api, receiver, platform.adminToken);
}, 120_000);

afterAll(async () => {
  await receiver?.close();
  await platform?.stop();
  await otlp?.close();
});

/** The http instrumentation names the method with the older or the current convention. */
const isPost = (s: ReceivedSpan) => (s.attributes['http.request.method'] ?? s.attributes['http.method']) === 'POST';
const traceIdOf = (traceparent: unknown) => /^00-([0-9a-f]{32})-[0-9a-f]{16}-0[0-9a-f]$/.exec(String(traceparent))?.[1];

describe('tracing', () => {
  it('follows POST /api/Members in one trace from the gateway to the webhook delivery', async () => {
    const { merchantId, observer } = await fx.merchantWithObserver();
    const key = await fx.createKey(merchantId);
    const path = `/traced/${randomUUID()}`;
    await fx.configure(merchantId, key, path);
    await fx.settle(merchantId, observer);

    const member = await fx.createMember(merchantId, key.key);
    const [delivery] = await receiver.waitFor(path, (r) => memberEvent(r, member.id).length > 0).then((r) => memberEvent(r, member.id));
    const traceId = traceIdOf(delivery!.headers.traceparent);
    expect(traceId, `traceparent of the webhook request: ${delivery!.headers.traceparent}`).toBeDefined();

    const has = (spans: ReceivedSpan[], what: (s: ReceivedSpan) => boolean) => spans.some(what);
    const deliverySpanId = String(delivery!.headers.traceparent).split('-')[2];
    const inTrace = await eventually(
      async () => {
        const spans = otlp.spans().filter((s) => s.traceId === traceId);
        // Each service exports on its own schedule: wait for both ends of the trace. The end is
        // the POST this receiver got (the observer's POST, in the same trace, may be exported first).
        const ends = has(spans, (s) => s.service === 'webhooks' && s.spanId === deliverySpanId) && has(spans, (s) => s.service === 'gateway' && s.kind === SPAN_KIND.SERVER);
        return ends ? spans : undefined;
      },
      10_000,
      100,
    );
    const spans = inTrace ?? otlp.spans().filter((s) => s.traceId === traceId);
    const summary = spans.map((s) => `${s.service}: ${s.name} (kind ${s.kind})`).join('\n');

    // The trace starts at the gateway's HTTP server span for the request.
    const root = spans.filter((s) => !s.parentSpanId);
    expect(root.map((s) => `${s.service} ${s.name}`), summary).toEqual(['gateway POST /api/Members']);
    expect(root[0]!.kind).toBe(SPAN_KIND.SERVER);
    // The gateway's gRPC call to billing, and billing's handling of it with its database work.
    expect(has(spans, (s) => s.service === 'gateway' && s.kind === SPAN_KIND.CLIENT && s.attributes['rpc.system'] === 'grpc' && String(s.attributes['rpc.service']).startsWith('billing.')), summary).toBe(true);
    expect(has(spans, (s) => s.service === 'billing' && s.kind === SPAN_KIND.SERVER && s.attributes['rpc.system'] === 'grpc'), summary).toBe(true);
    expect(has(spans, (s) => s.service === 'billing' && s.kind === SPAN_KIND.CLIENT && s.attributes['db.system'] === 'postgresql'), summary).toBe(true);
    // The outbox relay's publish and the webhooks service's consume, per the messaging conventions.
    const publish = spans.find((s) => s.service === 'billing' && s.kind === SPAN_KIND.PRODUCER);
    expect(publish, summary).toMatchObject({ name: 'publish events.member.created', attributes: { 'messaging.system': 'nats', 'messaging.destination.name': 'events.member.created', 'messaging.operation.type': 'send' } });
    const consume = spans.find((s) => s.service === 'webhooks' && s.kind === SPAN_KIND.CONSUMER);
    expect(consume, summary).toMatchObject({ name: 'process events.member.created', parentSpanId: publish!.spanId, attributes: { 'messaging.system': 'nats', 'messaging.operation.type': 'process' } });
    // The delivery: the POST to the endpoint (the observer key gets one too), whose span the receiver's traceparent names.
    const posts = spans.filter((s) => s.service === 'webhooks' && s.kind === SPAN_KIND.CLIENT && isPost(s));
    expect(posts.map((s) => s.spanId), summary).toContain(deliverySpanId);
    // Named by the endpoint's origin only: a webhook URL's path is often its credential (it was exported whole).
    const post = posts.find((s) => s.spanId === deliverySpanId)!;
    expect(JSON.stringify(post.attributes)).not.toContain(path);
    expect(String(post.attributes['http.url'] ?? post.attributes['url.full'])).toMatch(/^http:\/\/(127\.0\.0\.1|localhost):\d+\/\[webhook path\]$/);

    // The gateway's access log names the request with the same trace id, and nothing personal.
    const access = platform.processes.gateway!.logs
      .map((l) => (l.startsWith('{') ? JSON.parse(l) : {}))
      .filter((l) => l.component === 'access' && l.traceId === traceId);
    expect(access).toEqual([expect.objectContaining({ level: 30, msg: 'request', method: 'POST', route: '/api/Members', status: 201, durationMs: expect.any(Number) })]);
    expect(JSON.stringify(access)).not.toContain(member.email);
  });

  it('exports no query string, email or SQL value in any span: hosted-page tokens, list filters and login emails are redacted', async () => {
    const { merchantId } = await fx.merchantWithObserver();
    const key = await fx.createKey(merchantId);
    const email = `traced.${randomUUID().slice(0, 8)}@example.com`;
    const token = `tok-${randomUUID()}`;
    expect((await api.get(`/api/Members?merchantId=${merchantId}&email=${encodeURIComponent(email)}`, { token: key.key })).status).toBe(200);
    expect((await api.post('/api/account/login', { email, password: 'wrong-password-1' })).status).toBe(401);
    await fetch(`${platform.gatewayUrl}/reset-password?token=${token}`);
    await fetch(`${platform.gatewayUrl}/nowhere/${encodeURIComponent(email)}?apikey=${token}`);
    // Wait for the login's database spans (identity) and the page's server span (gateway).
    const spans = await eventually(
      async () => {
        const all = otlp.spans();
        const login = all.some((s) => s.service === 'identity' && s.attributes['db.system'] === 'postgresql' && /email/.test(String(s.attributes['db.statement'] ?? '')));
        const page = all.some((s) => s.service === 'gateway' && /reset-password/.test(String(s.attributes['http.url'] ?? s.attributes['url.full'] ?? s.attributes['http.target'] ?? '')));
        return login && page ? all : undefined;
      },
      15_000,
      100,
    );
    expect(spans, 'the login and page spans were exported').toBeDefined();
    const exported = JSON.stringify(spans);
    expect(exported).not.toContain(email);
    expect(exported).not.toContain(encodeURIComponent(email));
    expect(exported).not.toContain(token);
    // Redacted, not dropped: the URL keeps its path, the statement its shape.
    expect(exported).toContain('/reset-password?REDACTED');
    expect(spans!.some((s) => s.service === 'identity' && /email\) = \?/.test(String(s.attributes['db.statement'] ?? '')))).toBe(true);
  });

  it('does not trace background polling', async () => {
    // The gateway polls identity's credential feed several times a second.
    const polls = otlp.spans().filter((s) => s.name.includes('ListCredentialChanges'));
    expect(polls).toEqual([]);
  });
});
