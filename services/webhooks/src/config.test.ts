import { describe, expect, it } from 'vitest';
import { WebhooksConfig } from './config.js';

const REQUIRED = { DATABASE_URL: 'postgres://localhost/x', PLATFORM_MODE: 'test' };

describe('webhooks config', () => {
  it('refuses a delivery timeout a timer cannot hold, rather than failing every attempt at once', () => {
    // Node fires a setTimeout of more than 2^31-1 ms (24.8 days) after 1 ms instead.
    expect(WebhooksConfig.safeParse({ ...REQUIRED, WEBHOOK_TIMEOUT_MS: '2147483647' }).success).toBe(true);
    const refused = WebhooksConfig.safeParse({ ...REQUIRED, WEBHOOK_TIMEOUT_MS: '2592000000' });
    expect(refused.success).toBe(false);
    expect(refused.error?.issues[0]?.path).toEqual(['WEBHOOK_TIMEOUT_MS']);
  });
});
