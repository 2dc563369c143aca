import { describe, expect, it } from 'vitest';
import { GatewayConfig, loadConfig } from './config.js';

const REQUIRED = { DATABASE_URL: 'postgres://localhost/x', PLATFORM_MODE: 'test' };

describe('gateway config', () => {
  it('listens on loopback unless told otherwise, like every service', () => {
    const config = loadConfig({ ...REQUIRED });
    expect(config.HOST).toBe('127.0.0.1');
    expect(config.PORT).toBe(8080);
    expect(loadConfig({ ...REQUIRED, HOST: '0.0.0.0' }).HOST).toBe('0.0.0.0');
  });

  it('keeps its schema fixed: another DB_SCHEMA is refused, not half-used', () => {
    expect(loadConfig({ ...REQUIRED }).DB_SCHEMA).toBe('gateway');
    expect(GatewayConfig.safeParse({ ...REQUIRED, DB_SCHEMA: 'gateway' }).success).toBe(true);
    const refused = GatewayConfig.safeParse({ ...REQUIRED, DB_SCHEMA: 'tenant_a' });
    expect(refused.success).toBe(false);
    expect(refused.error?.issues[0]?.message).toMatch(/schema is fixed: gateway/);
  });
});

describe('gateway config timers', () => {
  it('refuses an idempotency cleanup interval a timer cannot hold, rather than sweeping back to back', () => {
    expect(GatewayConfig.safeParse({ ...REQUIRED, IDEMPOTENCY_CLEANUP_INTERVAL_MS: '2147483647' }).success).toBe(true);
    const refused = GatewayConfig.safeParse({ ...REQUIRED, IDEMPOTENCY_CLEANUP_INTERVAL_MS: '2592000000' });
    expect(refused.success).toBe(false);
    expect(refused.error?.issues[0]?.path).toEqual(['IDEMPOTENCY_CLEANUP_INTERVAL_MS']);
  });
});
