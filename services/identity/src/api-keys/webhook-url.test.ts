import { describe, expect, it } from 'vitest';
import { assertWebhookUrlAllowed } from './webhook-url.js';

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
