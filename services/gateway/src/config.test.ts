import { describe, expect, it } from 'vitest';
import { loadConfig } from './config.js';

const REQUIRED = { DATABASE_URL: 'postgres://localhost/x', PLATFORM_MODE: 'test' };

describe('gateway config', () => {
  it('listens on loopback unless told otherwise, like every service', () => {
    const config = loadConfig({ ...REQUIRED });
    expect(config.HOST).toBe('127.0.0.1');
    expect(config.PORT).toBe(8080);
    expect(loadConfig({ ...REQUIRED, HOST: '0.0.0.0' }).HOST).toBe('0.0.0.0');
  });
});
