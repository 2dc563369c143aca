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
});
