import { describe, expect, it } from 'vitest';
import { returnUrlProblem } from './return-url.js';

describe('returnUrlProblem', () => {
  it('accepts https anywhere, and plain http to any loopback host outside production only', () => {
    expect(returnUrlProblem('https://shop.example/done', true)).toBeUndefined();
    for (const url of ['http://localhost:3000/done', 'http://127.0.0.1/done', 'http://127.0.0.2:8080/done', 'http://[::1]/done', 'http://[::ffff:127.0.0.9]/done']) {
      expect(returnUrlProblem(url, false), url).toBeUndefined();
      expect(returnUrlProblem(url, true), url).toMatch(/https/);
    }
  });

  it('refuses plain http to hosts that only look like loopback, other schemes and credentials', () => {
    for (const url of ['http://127.0.0.1.nip.io/done', 'http://localhost.evil.example/', 'http://10.0.0.1/', 'http://[::2]/', 'http://shop.example/x', 'javascript:alert(1)', 'data:text/html,x']) {
      expect(returnUrlProblem(url, false), url).toBeDefined();
    }
    expect(returnUrlProblem('https://user:pw@shop.example/', false)).toMatch(/credentials/);
    expect(returnUrlProblem('not a url', false)).toMatch(/absolute/);
    // Kept exactly as sent, so never trimmed: whitespace and control characters anywhere are refused.
    for (const url of [' https://shop.example/', 'https://shop.example/ ', 'https://shop.example/a b', '\thttps://shop.example/', 'https://shop.example/\u0007']) {
      expect(returnUrlProblem(url, false), JSON.stringify(url)).toMatch(/absolute/);
    }
  });
});
