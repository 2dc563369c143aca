import { describe, expect, it } from 'vitest';
import type { ApiKeyEndpointState } from '@billing/contracts';
import { Endpoint, newestStates } from './endpoint.js';

const state = (over: Partial<ApiKeyEndpointState> = {}): ApiKeyEndpointState => ({
  apiKeyId: '00000000-0000-4000-8000-00000000000a',
  merchantId: '00000000-0000-4000-8000-00000000000b',
  webhookUrl: 'https://example.com/hook',
  webhookEvents: null,
  webhookEnabled: true,
  revoked: false,
  version: 2,
  ...over,
});

describe('Endpoint.accepts', () => {
  it('takes every webhook type when webhookEvents is null', () => {
    const e = Endpoint.fromState(state());
    expect(e.accepts('member.created')).toBe(true);
    expect(e.accepts('subscription.cancelled')).toBe(true);
  });
  it('takes nothing when webhookEvents is empty', () => {
    expect(Endpoint.fromState(state({ webhookEvents: [] })).accepts('member.created')).toBe(false);
  });
  it('takes only the subscribed types', () => {
    const e = Endpoint.fromState(state({ webhookEvents: ['subscription.created'] }));
    expect(e.accepts('subscription.created')).toBe(true);
    expect(e.accepts('member.created')).toBe(false);
  });
  it('takes nothing when disabled, revoked or without a URL', () => {
    expect(Endpoint.fromState(state({ webhookEnabled: false })).accepts('member.created')).toBe(false);
    expect(Endpoint.fromState(state({ revoked: true })).accepts('member.created')).toBe(false);
    expect(Endpoint.fromState(state({ webhookUrl: null })).accepts('member.created')).toBe(false);
  });
  it('never takes internal event types', () => {
    expect(Endpoint.fromState(state()).accepts('api_key.webhook_configured')).toBe(false);
  });
});

describe('newestStates', () => {
  it('keeps the highest version per key whatever the order', () => {
    const other = '00000000-0000-4000-8000-00000000000c';
    const out = newestStates([state({ version: 5 }), state({ version: 3 }), state({ apiKeyId: other, version: 1 }), state({ version: 4 })]);
    expect(out.map((s) => [s.apiKeyId, s.version])).toEqual([
      [state().apiKeyId, 5],
      [other, 1],
    ]);
  });
});
