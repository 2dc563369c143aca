import { describe, expect, it } from 'vitest';
import { assertWebhookUrlAllowed } from './webhook-url.js';

describe('assertWebhookUrlAllowed', () => {
  it('allows http to loopback outside production only', async () => {
    await expect(assertWebhookUrlAllowed('http://127.0.0.1:9000/hook', false)).resolves.toBeUndefined();
    await expect(assertWebhookUrlAllowed('http://127.0.0.1:9000/hook', true)).rejects.toMatchObject({ code: 'validation_failed' });
  });
  // Regression: only 127.0.0.1 of 127.0.0.0/8 passed, so http://127.0.0.2:9000/hook was refused outside production.
  it.each([
    'http://127.0.0.2:9000/hook',
    'http://127.255.255.254/hook',
    'http://127.1/hook',
    'http://0x7f000002/hook',
    'http://localhost./hook',
    'http://[::1]:9000/hook',
    'http://[::ffff:127.0.0.2]:9000/hook',
  ])('accepts plain http to the loopback host of %s outside production only', async (url) => {
    await expect(assertWebhookUrlAllowed(url, false)).resolves.toBeUndefined();
    await expect(assertWebhookUrlAllowed(url, true)).rejects.toMatchObject({ code: 'validation_failed' });
  });
  it.each([
    'http://127.0.0.1.evil.example/hook',
    'http://127.0.0.1.nip.io/hook',
    'http://localhost.evil.example/hook',
    'http://evil.example#@127.0.0.1/hook',
    'http://128.0.0.1/hook',
    'http://10.0.0.1/hook',
    'http://0.0.0.0/hook',
    'http://[::ffff:10.0.0.1]/hook',
    'http://[::127.0.0.1]/hook',
    'http://[64:ff9b::7f00:1]/hook',
    'http://[2002:7f00:1::]/hook',
    'http://[::2]/hook',
  ])('refuses plain http to the non-loopback host of %s', async (url) => {
    await expect(assertWebhookUrlAllowed(url, false)).rejects.toMatchObject({ code: 'validation_failed', extensions: { errors: { webhookUrl: expect.any(Array) } } });
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

describe('assertWebhookUrlAllowed in production: the shared egress policy', () => {
  it.each(['https://[::ffff:127.0.0.1]/', 'https://[::ffff:10.0.0.1]/', 'https://[::ffff:169.254.169.254]/', 'https://[64:ff9b::a9fe:a9fe]/', 'https://[::127.0.0.1]/', 'https://[2002:7f00:1::]/', 'https://0x7f000001/'])(
    'refuses %s',
    async (url) => {
      await expect(assertWebhookUrlAllowed(url, true)).rejects.toMatchObject({ code: 'validation_failed' });
    },
  );
  it('refuses a name with one private resolver answer and accepts one with only public answers', async () => {
    const dns = async (h: string) => (h === 'bad.example.com' ? ['93.184.215.14', '::ffff:192.168.0.1'] : ['93.184.215.14']);
    await expect(assertWebhookUrlAllowed('https://bad.example.com/hook', true, dns)).rejects.toMatchObject({ code: 'validation_failed' });
    await expect(assertWebhookUrlAllowed('https://good.example.com/hook', true, dns)).resolves.toBeUndefined();
  });
  it('answers 503 with Retry-After, not 400, when the host could not be looked up for now; 400 when it does not exist', async () => {
    const failing = (code: string) => async () => {
      throw Object.assign(new Error(`getaddrinfo ${code}`), { code });
    };
    await expect(assertWebhookUrlAllowed('https://hooks.example.com/hook', true, failing('EAI_AGAIN'))).rejects.toMatchObject({ code: 'service_unavailable', extensions: { retryAfterSeconds: 5 } });
    await expect(assertWebhookUrlAllowed('https://hooks.example.com/hook', true, failing('ENOTFOUND'))).rejects.toMatchObject({
      code: 'validation_failed',
      extensions: { errors: { webhookUrl: ['Host does not resolve.'] } },
    });
  });
});
