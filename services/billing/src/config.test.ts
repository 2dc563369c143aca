import { describe, expect, it } from 'vitest';
import { BillingConfig } from './config.js';

const REQUIRED = { DATABASE_URL: 'postgres://localhost/x', PLATFORM_MODE: 'test' };

describe('billing config', () => {
  it('refuses a billing run interval a timer cannot hold, rather than running back to back', () => {
    // Node runs a setInterval of more than 2^31-1 ms (24.8 days) every millisecond instead.
    expect(BillingConfig.parse({ ...REQUIRED, BILLING_RUN_INTERVAL_MS: '2147483647' }).BILLING_RUN_INTERVAL_MS).toBe(2_147_483_647);
    const refused = BillingConfig.safeParse({ ...REQUIRED, BILLING_RUN_INTERVAL_MS: '2592000000' });
    expect(refused.success).toBe(false);
    expect(refused.error?.issues[0]?.path).toEqual(['BILLING_RUN_INTERVAL_MS']);
  });
});

describe('billing config provider timeout', () => {
  it('refuses a provider timeout a timer cannot hold, rather than timing every call out at once', () => {
    expect(BillingConfig.safeParse({ ...REQUIRED, PAYMENT_PROVIDER_TIMEOUT_MS: '2147483647' }).success).toBe(true);
    const refused = BillingConfig.safeParse({ ...REQUIRED, PAYMENT_PROVIDER_TIMEOUT_MS: '2592000000' });
    expect(refused.success).toBe(false);
    expect(refused.error?.issues[0]?.path).toEqual(['PAYMENT_PROVIDER_TIMEOUT_MS']);
  });
});
