import { randomBytes, randomUUID } from 'node:crypto';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { EventEnvelope } from '@billing/contracts';
import { createLogger } from '@billing/service-runtime';
import { useMigratedDatabase } from '../../../../tests/support/migrated-database.js';
import { openWebhooksDatabase } from '../app.js';
import { MIGRATIONS } from '../migrations/index.js';
import { WebhooksConfig } from '../config.js';
import { ingestEvents } from '../events/ingest.js';
import { AttemptRecorder } from './attempt-recorder.js';
import { Dispatcher } from './dispatcher.js';
import { HttpSender } from './http-sender.js';
import { RetryPolicy } from './retry-policy.js';

/**
 * Regression: in production mode a webhook URL written as an IPv4-mapped loopback address
 * (`https://[::ffff:127.0.0.1]:port/`) was treated as public, and the attempt stored the raw
 * error text and the internal response body where the merchant reads them.
 */
const { orm } = useMigratedDatabase({
  open: (url) => openWebhooksDatabase(WebhooksConfig.parse({ DATABASE_URL: url })),
  schema: 'webhooks',
  migrations: MIGRATIONS,
});
let internal: Server;
let connections = 0;
const merchantId = randomUUID();

beforeAll(async () => {
  // An "internal" service on loopback that would answer if it were reached.
  internal = createServer((_req, res) => res.writeHead(200).end('internal secrets'));
  internal.on('connection', () => connections++);
  await new Promise<void>((r) => internal.listen(0, '127.0.0.1', r));
});

afterAll(async () => {
  internal?.closeAllConnections();
  await new Promise((r) => internal?.close(r));
});

const event = (type: string, data: Record<string, unknown>): EventEnvelope => ({ id: randomUUID(), type, version: 1, occurredAt: new Date().toISOString(), merchantId, data });

describe('production-mode webhook delivery', () => {
  it('refuses an IPv4-mapped loopback endpoint with address_refused, contacting nothing and storing no body', async () => {
    const port = (internal.address() as AddressInfo).port;
    const apiKeyId = randomUUID();
    const url = `https://[::ffff:127.0.0.1]:${port}/hook`;
    await ingestEvents(orm(), [event('api_key.webhook_configured', { apiKeyId, merchantId, webhookUrl: url, webhookEvents: null, webhookEnabled: true, revoked: false, version: 2 })], { leaseMs: 60_000, startNow: () => true });
    const { jobs } = await ingestEvents(orm(), [event('member.created', { id: randomUUID() })], { leaseMs: 60_000, startNow: () => true });
    expect(jobs.map((j) => j.url)).toEqual([url]);

    const logger = createLogger('egress-test', 'silent');
    const recorder = new AttemptRecorder(orm(), new RetryPolicy([60_000], 0), logger);
    const sender = new HttpSender({ timeoutMs: 2000, production: true });
    const dispatcher = new Dispatcher({ sender, keys: { keyFor: async () => randomBytes(32) }, recorder, logger }, { global: 4, perEndpoint: 4, timeoutMs: 2000 });
    for (const job of jobs) dispatcher.submit(job);
    await dispatcher.close(5000);
    await recorder.drain();
    sender.close();

    const attempts = await orm().em.getConnection().execute(`select "status_code", "error", "response_body" from "attempts" a join "deliveries" d on d."id" = a."delivery_id" where d."api_key_id" = ?`, [apiKeyId]);
    expect(attempts).toEqual([{ status_code: null, error: 'address_refused', response_body: null }]);
    const [delivery] = await orm().em.getConnection().execute(`select "status", "scheduled_attempts" from "deliveries" where "api_key_id" = ?`, [apiKeyId]);
    expect(delivery).toMatchObject({ status: 'Pending', scheduled_attempts: 1 });
    expect(connections).toBe(0);
  });
});
