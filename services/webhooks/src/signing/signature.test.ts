import { randomBytes } from 'node:crypto';
import { Webhook } from 'standardwebhooks';
import { describe, expect, it } from 'vitest';
import { signatureHeaders, signingKey } from './signature.js';

describe('signatureHeaders', () => {
  const secret = `whsec_${randomBytes(32).toString('base64')}`;
  const body = JSON.stringify({ id: 'e1', type: 'member.created', data: { a: 'ü' } });

  it('is verified by the standardwebhooks library', () => {
    const headers = signatureHeaders(signingKey(secret), 'msg_1', Math.floor(Date.now() / 1000), body);
    expect(new Webhook(secret).verify(body, headers)).toEqual(JSON.parse(body));
  });

  it('fails verification with another secret or a changed body', () => {
    const headers = signatureHeaders(signingKey(secret), 'msg_1', Math.floor(Date.now() / 1000), body);
    expect(() => new Webhook(`whsec_${randomBytes(32).toString('base64')}`).verify(body, headers)).toThrow();
    expect(() => new Webhook(secret).verify(body.replace('e1', 'e2'), headers)).toThrow();
  });
});
