import { jetstreamManager } from '@nats-io/jetstream';
import { connect, type NatsConnection } from '@nats-io/transport-node';
import { afterAll, describe, expect, inject, it } from 'vitest';
import { EVENTS_STREAM } from '@billing/contracts';
import { natsServerOptions } from '@billing/service-runtime';
import { apiClient, createApiKey, createMerchant } from '../support/fixtures.js';
import '../support/e2e.js';

// NATS used to accept anyone who reached it: a captured `events.member.created` republished with
// a new id was signed and delivered by webhooks, and an `api_key.webhook_configured` with another
// URL and a higher version redirected a merchant's webhooks for good. The platform's private
// nats-server now requires the user and password the launcher made for it.
const natsUrl = inject('natsUrl');
const { servers, ...credentials } = natsServerOptions(natsUrl);
// Without a nats-server binary the tests share the machine's server in NATS_URL, which may have no authorization.
const privateServer = credentials.pass !== undefined || credentials.token !== undefined;

const refusal = async (opts: Parameters<typeof connect>[0]) => {
  try {
    const nc = await connect({ ...opts, reconnect: false, timeout: 5000 });
    await nc.close();
    return undefined;
  } catch (e) {
    return e as Error;
  }
};

describe.skipIf(!privateServer)("the platform's NATS accepts only the services' credentials", () => {
  const connections: NatsConnection[] = [];
  afterAll(async () => {
    for (const nc of connections) await nc.close().catch(() => undefined);
  });

  it('refuses a client without credentials, so it can neither read nor publish events', async () => {
    const err = await refusal({ servers });
    expect(err?.message).toMatch(/authorization/i);
  });

  it('refuses a wrong password and a guessed token', async () => {
    expect((await refusal({ servers, user: credentials.user ?? 'platform', pass: 'not-the-password' }))?.message).toMatch(/authorization/i);
    expect((await refusal({ servers, token: 'platform' }))?.message).toMatch(/authorization/i);
  });

  it("carries the platform's events for clients with the services' credentials", async () => {
    const nc = await connect({ ...natsServerOptions(natsUrl), reconnect: false });
    connections.push(nc);
    const jsm = await jetstreamManager(nc);
    const before = (await jsm.streams.info(EVENTS_STREAM)).state.last_seq;
    const api = apiClient(inject('gatewayUrl'));
    const merchant = await createMerchant(api, inject('adminToken'));
    await createApiKey(api, inject('adminToken'), merchant.id); // identity's outbox relay publishes api_key.created
    await expect.poll(async () => (await jsm.streams.info(EVENTS_STREAM)).state.last_seq, { timeout: 10_000 }).toBeGreaterThan(before);
  });
});
