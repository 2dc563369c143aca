import { describe, expect, it } from 'vitest';
import { CheckoutConfig } from './config.js';

const REQUIRED = { DATABASE_URL: 'postgres://localhost/x', PLATFORM_MODE: 'test' };

describe('checkout config', () => {
  it('refuses a recovery interval a timer cannot hold, rather than recovering back to back', () => {
    // Node runs a setInterval of more than 2^31-1 ms (24.8 days) every millisecond instead.
    expect(CheckoutConfig.safeParse({ ...REQUIRED, CHECKOUT_RECOVERY_INTERVAL_MS: '2147483647' }).success).toBe(true);
    const refused = CheckoutConfig.safeParse({ ...REQUIRED, CHECKOUT_RECOVERY_INTERVAL_MS: '2592000000' });
    expect(refused.success).toBe(false);
    expect(refused.error?.issues[0]?.path).toEqual(['CHECKOUT_RECOVERY_INTERVAL_MS']);
  });
});
