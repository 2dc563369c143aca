import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { setUpMerchant, type TestMerchant } from '../support/billing-fixtures.js';
import { apiClient, type ApiClient } from '../support/fixtures.js';
import { messagesTo, tokenFromLink, waitForMessage } from '../support/mailbox.js';
import { startTestPlatform, type TestPlatform } from '../support/platform.js';

// Invitations by SMS need an SMS channel, so this file runs its own platform with the file SMS
// provider (the shared one has none, where a phone-only invitation is 422 NoDeliveryChannel).

let platform: TestPlatform;
let api: ApiClient;
let m: TestMerchant;
beforeAll(async () => {
  platform = await startTestPlatform({ services: ['identity', 'billing', 'checkout', 'gateway'], serviceEnv: { checkout: { SMS_PROVIDER: 'file' } } });
  api = apiClient(platform.gatewayUrl!);
  m = await setUpMerchant(api, platform.adminToken);
}, 120_000);
afterAll(() => platform?.stop());

describe('POST /api/Invitations with an SMS channel', () => {
  it('sends a phone-only invitation by SMS with the onboarding link', async () => {
    const phone = `+61 4${Date.now().toString().slice(-8)}`;
    const res = await api.post('/api/Invitations', { merchantId: m.id, firstName: 'Ada', lastName: 'Lovelace', phone }, { token: m.key });
    expect(res.status).toBe(200);
    expect(res.body).toMatchObject({ outcome: 'Ok', email: null, phone });
    const sms = await waitForMessage(platform.dataDir, phone, () => true, { channel: 'sms' });
    expect(tokenFromLink(sms.text, 'onboard')).toBe(res.body.token);
    expect(new URL(sms.text.match(/https?:\/\/\S+/)![0]).origin).toBe(new URL(platform.gatewayUrl!).origin);
  });

  it('sends both an email and an SMS when both are given', async () => {
    const phone = `+61 4${Date.now().toString().slice(-8)}`;
    const email = `both${Date.now()}@example.com`;
    const res = await api.post('/api/Invitations', { merchantId: m.id, firstName: 'Ada', lastName: 'Lovelace', email, phone }, { token: m.key });
    expect(res.status).toBe(200);
    await waitForMessage(platform.dataDir, phone, () => true, { channel: 'sms' });
    await waitForMessage(platform.dataDir, email);
    expect(await messagesTo(platform.dataDir, email)).toHaveLength(1);
  });
});
