import { describe, expect, it } from 'vitest';
import { DomainError } from '@billing/contracts';
import { fingerprintOf, normalisePath, parseIdempotencyKey, scopeOf } from './idempotency-engine.js';
import { IdempotencyRecord, unknownOutcome } from './idempotency-record.js';

const LEASE_MS = 30_000;
const T0 = new Date('2026-11-21T12:00:00Z');
const at = (ms: number) => new Date(T0.getTime() + ms);

function record(props: Partial<IdempotencyRecord>): IdempotencyRecord {
  return Object.assign(new IdempotencyRecord(), {
    scope: 'm1',
    key: 'k1',
    fingerprint: 'fp',
    method: 'POST',
    path: '/api/subscriptions',
    state: 'in_flight',
    claimToken: '00000000-0000-4000-8000-000000000000',
    claimedAt: T0,
    createdAt: T0,
    expiresAt: at(24 * 3_600_000),
    ...props,
  });
}

describe('IdempotencyRecord.verdictFor', () => {
  it('refuses a different request with the same key in every state', () => {
    for (const state of ['in_flight', 'completed', 'released'] as const) {
      expect(record({ state, responseStatus: 201, responseBody: '{}' }).verdictFor('other', at(1000), LEASE_MS)).toEqual({ kind: 'reused' });
    }
  });

  it('answers "in progress" while the claim is within its lease', () => {
    expect(record({}).verdictFor('fp', at(LEASE_MS - 1), LEASE_MS)).toEqual({ kind: 'in_progress' });
  });

  it('treats a claim past its lease as an unknown outcome (a crashed gateway)', () => {
    const verdict = record({}).verdictFor('fp', at(LEASE_MS), LEASE_MS);
    expect(verdict.kind).toBe('replay');
    if (verdict.kind !== 'replay') return;
    expect(verdict.response.status).toBe(500);
    expect(JSON.parse(verdict.response.body!)).toMatchObject({ status: 500, type: expect.stringMatching(/idempotency-outcome-unknown$/) });
    // It never ended with a 500 (the probe's complaint): the detail says it did not finish.
    expect(JSON.parse(verdict.response.body!).detail).toMatch(/^The original request with this Idempotency-Key did not finish within the lease/);
  });

  it('replays a completed outcome as stored', () => {
    const r = record({ state: 'completed', responseStatus: 201, responseHeaders: { location: '/api/Subscriptions/1' }, responseBody: '{"id":"1"}' });
    expect(r.verdictFor('fp', at(1000), LEASE_MS)).toEqual({
      kind: 'replay',
      response: { status: 201, headers: { location: '/api/Subscriptions/1' }, body: '{"id":"1"}' },
    });
  });

  it('lets the same request claim a key released by a 4xx', () => {
    expect(record({ state: 'released' }).verdictFor('fp', at(1000), LEASE_MS)).toEqual({ kind: 'claimable' });
  });

  it('frees an expired key for any request', () => {
    const r = record({ state: 'completed', responseStatus: 201, expiresAt: at(5000) });
    expect(r.verdictFor('other', at(5000), LEASE_MS)).toEqual({ kind: 'claimable' });
  });
});

describe('unknownOutcome', () => {
  it('keeps the original status and says the outcome is unknown', () => {
    const stored = unknownOutcome(503, '/api/subscriptions', 'abc');
    expect(stored.status).toBe(503);
    expect(stored.headers['content-type']).toMatch(/^application\/problem\+json/);
    const body = JSON.parse(stored.body!);
    expect(body).toMatchObject({ status: 503, instance: '/api/subscriptions', originalTraceId: 'abc' });
    expect(body).not.toHaveProperty('traceId');
    expect(body.detail).toMatch(/outcome is unknown/);
  });
});

describe('parseIdempotencyKey', () => {
  const fieldOf = (value: string | undefined) => {
    try {
      parseIdempotencyKey(value);
    } catch (e) {
      expect(e).toBeInstanceOf(DomainError);
      return (e as DomainError).extensions.errors;
    }
    throw new Error('accepted');
  };

  it('requires the header, naming it', () => {
    expect(fieldOf(undefined)).toHaveProperty('Idempotency-Key');
  });
  it('refuses an empty or blank key', () => {
    expect(fieldOf('')).toHaveProperty('Idempotency-Key');
    expect(fieldOf('   ')).toHaveProperty('Idempotency-Key');
  });
  it('counts characters, not the bytes of their UTF-8 (as Node hands them over, one character per byte)', () => {
    const asReceived = (text: string) => Buffer.from(text, 'utf8').toString('latin1');
    expect(parseIdempotencyKey(asReceived('é'.repeat(255)))).toBe('é'.repeat(255));
    expect(parseIdempotencyKey(asReceived('clé-🔑'))).toBe('clé-🔑');
    expect(() => parseIdempotencyKey(asReceived('é'.repeat(256)))).toThrow(/at most 255 characters/);
    expect(() => parseIdempotencyKey(Buffer.from([0x6b, 0xff, 0x6b]).toString('latin1'))).toThrow(/UTF-8/);
  });

  it('accepts 255 characters and refuses 256', () => {
    expect(parseIdempotencyKey('k'.repeat(255))).toBe('k'.repeat(255));
    expect(fieldOf('k'.repeat(256))).toHaveProperty('Idempotency-Key');
  });
});

describe('fingerprintOf', () => {
  it('ignores the case of the path, a trailing slash and the query', () => {
    const body = Buffer.from('{"a":1}');
    expect(fingerprintOf('POST', normalisePath('/api/Subscriptions/?x=1'), body)).toBe(fingerprintOf('post', normalisePath('/api/subscriptions'), body));
  });
  it('differs by method, path and body bytes', () => {
    const base = fingerprintOf('POST', '/a', Buffer.from('{"a":1}'));
    expect(fingerprintOf('PUT', '/a', Buffer.from('{"a":1}'))).not.toBe(base);
    expect(fingerprintOf('POST', '/b', Buffer.from('{"a":1}'))).not.toBe(base);
    expect(fingerprintOf('POST', '/a', Buffer.from('{"a": 1}'))).not.toBe(base);
  });
  it('treats no body as the empty body', () => {
    expect(fingerprintOf('POST', '/a', undefined)).toBe(fingerprintOf('POST', '/a', Buffer.alloc(0)));
  });
});

describe('scopeOf', () => {
  it('scopes merchant credentials by merchant and the platform admin as "admin"', () => {
    expect(scopeOf({ kind: 'apiKey', apiKeyId: 'k', merchantId: 'm1' })).toBe('m1');
    expect(scopeOf({ kind: 'merchantUser', userId: 'u', merchantId: 'm1', role: 'Staff' })).toBe('m1');
    expect(scopeOf({ kind: 'admin' })).toBe('admin');
  });
});
