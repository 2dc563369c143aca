import { describe, expect, it } from 'vitest';
import { assertWebhookUrlAllowed, isNonPublicAddress } from './webhook-url.js';

describe('isNonPublicAddress', () => {
  it.each(['127.0.0.1', '10.1.2.3', '172.16.0.1', '172.31.255.255', '192.168.1.1', '169.254.169.254', '::1', 'fe80::1', 'fd00::1', '::ffff:127.0.0.1', '0.0.0.0'])('%s is not public', (a) => {
    expect(isNonPublicAddress(a)).toBe(true);
  });
  it.each(['8.8.8.8', '172.32.0.1', '2606:4700::1111', '1.1.1.1'])('%s is public', (a) => {
    expect(isNonPublicAddress(a)).toBe(false);
  });
});

describe('assertWebhookUrlAllowed', () => {
  it('allows http to loopback outside production only', async () => {
    await expect(assertWebhookUrlAllowed('http://127.0.0.1:9000/hook', false)).resolves.toBeUndefined();
    await expect(assertWebhookUrlAllowed('http://127.0.0.1:9000/hook', true)).rejects.toMatchObject({ code: 'validation_failed' });
  });
  it('refuses plain http to other hosts and other schemes', async () => {
    await expect(assertWebhookUrlAllowed('http://example.com/hook', false)).rejects.toMatchObject({ code: 'validation_failed' });
    await expect(assertWebhookUrlAllowed('ftp://example.com/hook', false)).rejects.toMatchObject({ code: 'validation_failed' });
  });
  it('refuses https to a private address in production', async () => {
    await expect(assertWebhookUrlAllowed('https://10.0.0.5/hook', true)).rejects.toMatchObject({ code: 'validation_failed' });
    await expect(assertWebhookUrlAllowed('https://[::1]/hook', true)).rejects.toMatchObject({ code: 'validation_failed' });
  });
});
