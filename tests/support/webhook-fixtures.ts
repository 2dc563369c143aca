import { randomUUID } from 'node:crypto';
import { expect } from 'vitest';
import { createApiKey, createMerchant, eventually, unique, type ApiClient } from './fixtures.js';
import type { ReceivedWebhook, Responder, WebhookReceiver } from './webhook-receiver.js';

export interface TestKey {
  id: string;
  key: string;
  signingSecret: string;
}

/** Requests carrying `type` for the member with this id. */
export const memberEvent = (reqs: ReceivedWebhook[], memberId: string, type = 'member.created') =>
  reqs.filter((r) => r.payload?.type === type && r.payload?.data?.id === memberId);

/** Answers requests about the member with this email with `answer` (n counts those requests), everything else with 204. */
export function onlyFor(email: string, answer: (n: number) => ReturnType<Responder>): Responder {
  let n = 0;
  return (req) => (req.payload?.data?.email === email ? answer(++n) : { status: 204 });
}

/** Steps of the webhook tests, through the gateway as an integrator would take them. */
export function webhookFixtures(api: ApiClient, receiver: WebhookReceiver, adminToken: string) {
  const createKey = async (merchantId: string) => (await createApiKey(api, adminToken, merchantId)) as TestKey;

  async function configure(merchantId: string, key: TestKey, path: string | null, settings: { webhookEvents?: string[] | null; webhookEnabled?: boolean } = {}) {
    const res = await api.put(
      `/api/ApiKeys/${key.id}/webhook`,
      { id: key.id, merchantId, webhookUrl: path ? receiver.url(path) : null, webhookEvents: null, webhookEnabled: path !== null, ...settings },
      { token: key.key },
    );
    expect(res.status, JSON.stringify(res.body)).toBe(200);
    if (path) receiver.secret(path, key.signingSecret);
  }

  async function createMember(merchantId: string, token: string, email = `${unique('member')}@example.com`) {
    const res = await api.post('/api/Members', { merchantId, email, firstName: 'Ada', lastName: 'Lovelace' }, { token });
    expect(res.status).toBe(201);
    return res.body as { id: string; email: string };
  }

  /** A merchant with an observer key (every event type) used to learn when settings have reached the webhooks service. */
  async function merchantWithObserver() {
    const merchant = await createMerchant(api, adminToken);
    return { merchantId: merchant.id, observer: await createKey(merchant.id) };
  }

  /**
   * Waits until every webhook setting changed so far has reached the webhooks service: points
   * the observer key at a fresh path and creates members until one arrives there. Identity's
   * events reach the webhooks service in commit order, so once the observer's new URL is in
   * use, every earlier change is too.
   */
  async function settle(merchantId: string, observer: TestKey): Promise<void> {
    const path = `/sync/${randomUUID()}`;
    await configure(merchantId, observer, path);
    for (let i = 0; i < 40; i++) {
      await createMember(merchantId, observer.key);
      try {
        await receiver.waitFor(path, (r) => r.length > 0, 1000);
        return;
      } catch {
        /* not there yet: create another */
      }
    }
    throw new Error('webhook settings never reached the webhooks service');
  }

  /** The delivery of an event to a key, with its attempts, once `until` holds for it. */
  async function deliveryOf(merchantId: string, token: string, eventId: string, apiKeyId: string, until: (d: any) => boolean = () => true, timeoutMs = 20_000) {
    return eventually(
      async () => {
        const res = await api.get(`/api/WebhookDeliveries?merchantId=${merchantId}&pageSize=200`, { token });
        expect(res.status).toBe(200);
        const d = res.body.items.find((x: any) => x.eventId === eventId && x.apiKeyId === apiKeyId);
        if (!d) return undefined;
        const full = await api.get(`/api/WebhookDeliveries/${d.id}`, { token });
        return until(full.body) ? full.body : undefined;
      },
      timeoutMs,
      100,
    );
  }

  /** The first member.created request for this member, anywhere on the receiver. */
  async function waitMember(memberId: string, timeoutMs = 20_000): Promise<ReceivedWebhook> {
    const end = Date.now() + timeoutMs;
    for (;;) {
      const hit = receiver.received().find((r) => r.payload?.type === 'member.created' && r.payload.data?.id === memberId);
      if (hit) return hit;
      if (Date.now() > end) throw new Error(`member.created for ${memberId} never arrived`);
      await new Promise((r) => setTimeout(r, 25));
    }
  }

  return { createKey, configure, createMember, merchantWithObserver, settle, deliveryOf, waitMember };
}
