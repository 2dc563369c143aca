import { describe, expect, it } from 'vitest';
import { DomainError } from '@billing/contracts';
import { merchantFilter, requireMerchantScope, requirePlatformScope, requireScope, scopeOfMerchant } from './scope.js';

const M = '0b6f3b1e-8a4f-4c47-9a52-1f0e0c6d2a11';
const codeOf = (f: () => unknown) => {
  try {
    f();
  } catch (e) {
    return e instanceof DomainError ? e.code : 'other';
  }
  return 'none';
};

describe('requireScope', () => {
  it('refuses a missing scope, an empty or malformed merchant id and an empty oneof', () => {
    expect(codeOf(() => requireScope(undefined))).toBe('bad_request');
    expect(codeOf(() => requireScope(null))).toBe('bad_request');
    expect(codeOf(() => requireScope({ kind: 'merchantId', merchantId: '' } as any))).toBe('bad_request');
    expect(codeOf(() => requireScope({ kind: 'merchantId', merchantId: 'not-a-uuid' } as any))).toBe('bad_request');
    expect(codeOf(() => requireScope({} as any))).toBe('bad_request');
  });

  it('decodes a merchant (lower-cased) and the platform', () => {
    expect(requireScope({ kind: 'merchantId', merchantId: M.toUpperCase() } as any)).toEqual({ kind: 'merchant', merchantId: M });
    expect(requireScope({ kind: 'platform', platform: {} } as any)).toEqual({ kind: 'platform' });
  });
});

describe('narrower scopes', () => {
  it('a call inside one merchant refuses the platform scope; a platform call forbids a merchant', () => {
    expect(requireMerchantScope({ kind: 'merchantId', merchantId: M } as any)).toBe(M);
    expect(codeOf(() => requireMerchantScope({ kind: 'platform', platform: {} } as any))).toBe('bad_request');
    expect(codeOf(() => requirePlatformScope({ kind: 'merchantId', merchantId: M } as any))).toBe('forbidden');
    expect(codeOf(() => requirePlatformScope(undefined))).toBe('bad_request');
  });

  it('filters by the merchant, and by nothing only for the platform', () => {
    expect(merchantFilter({ kind: 'merchant', merchantId: M })).toEqual({ merchantId: M });
    expect(merchantFilter({ kind: 'platform' })).toEqual({});
  });

  it('never builds the platform scope from an empty merchant id', () => {
    expect(() => scopeOfMerchant('')).toThrow();
    expect(scopeOfMerchant(M)).toEqual({ merchantId: M });
  });
});
