import { createHmac, randomBytes, randomUUID } from 'node:crypto';
import { describe, expect, it } from 'vitest';
import { decodeLink, encodeLink, signLink, verifyLink, type LinkPayload } from './link-codec.js';

const secret = `whsec_${randomBytes(32).toString('base64')}`;
const payload: LinkPayload = {
  v: 1,
  kid: randomUUID(),
  mid: randomUUID(),
  pid: randomUUID(),
  nonce: 'n0nce-123456',
  exp: 1_900_000_000,
  returnUrl: 'https://shop.example/thanks',
  customer: { email: 'ada@example.com', firstName: 'Ada', lastName: 'Lovelace', phone: null },
};

describe('link codec', () => {
  it('round-trips a payload through d', () => {
    const d = encodeLink(payload);
    expect(d).toMatch(/^[A-Za-z0-9_-]+$/);
    expect(decodeLink(d)).toEqual(payload);
  });

  it('refuses a d whose text cannot be stored: a NUL, an unpaired surrogate, bytes that are not UTF-8', () => {
    expect(decodeLink(encodeLink({ ...payload, nonce: 'abcdefgh\u0000' }))).toBeUndefined();
    expect(decodeLink(encodeLink({ ...payload, customer: { firstName: 'a\ud800b' } }))).toBeUndefined();
    expect(decodeLink(encodeLink({ ...payload, customer: { lastName: 'b\udc00' } }))).toBeUndefined();
    const json = Buffer.from(JSON.stringify(payload), 'utf8');
    const at = json.indexOf('Ada');
    expect(decodeLink(Buffer.concat([json.subarray(0, at), Buffer.from([0xff]), json.subarray(at)]).toString('base64url'))).toBeUndefined();
    // A paired surrogate (an emoji) and other non-ASCII text are fine.
    const emoji = { ...payload, customer: { firstName: 'Zoë 😀' } };
    expect(decodeLink(encodeLink(emoji))).toEqual(emoji);
  });

  it('signs exactly as contract §6: HMAC-SHA256 of the ASCII d keyed with the decoded secret, base64url without padding', () => {
    const d = encodeLink(payload);
    const key = Buffer.from(secret.slice('whsec_'.length), 'base64');
    const expected = createHmac('sha256', key).update(Buffer.from(d, 'ascii')).digest('base64').replace(/\+/g, '-').replace(/\//g, '_').replace(/=+$/, '');
    expect(signLink(d, secret)).toBe(expected);
    expect(signLink(d, secret)).not.toContain('=');
  });

  it('verifies its own signature and refuses a changed d, a changed s or another secret', () => {
    const d = encodeLink(payload);
    const s = signLink(d, secret);
    expect(verifyLink(d, s, secret)).toBe(true);
    expect(verifyLink(encodeLink({ ...payload, pid: randomUUID() }), s, secret)).toBe(false);
    expect(verifyLink(d, s.slice(0, -2) + (s.endsWith('AA') ? 'BB' : 'AA'), secret)).toBe(false);
    expect(verifyLink(d, s, `whsec_${randomBytes(32).toString('base64')}`)).toBe(false);
    expect(verifyLink(d, s.slice(1), secret)).toBe(false);
    expect(verifyLink(d, `${s}+/`, secret)).toBe(false);
  });

  it('refuses a d of deeply nested JSON without overflowing the stack', () => {
    const deep = (n: number) => Buffer.from(`${'['.repeat(n)}${']'.repeat(n)}`).toString('base64url');
    expect(decodeLink(deep(200_000))).toBeUndefined();
    expect(decodeLink(Buffer.from(JSON.stringify({ ...payload, extra: [[[[[[[[['x']]]]]]]]] })).toString('base64url'))).toBeUndefined();
  });

  it('decodes only base64url JSON of the link shape', () => {
    expect(decodeLink('not base64!')).toBeUndefined();
    expect(decodeLink(Buffer.from('not json').toString('base64url'))).toBeUndefined();
    expect(decodeLink(encodeLink({ ...payload, v: 2 } as unknown as LinkPayload))).toBeUndefined();
    expect(decodeLink(encodeLink({ ...payload, nonce: 'short' }))).toBeUndefined();
    const { customer: _c, ...minimal } = payload;
    expect(decodeLink(encodeLink(minimal as LinkPayload))).toEqual(minimal);
  });
});
