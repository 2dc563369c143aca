import { describe, expect, it } from 'vitest';
import { DomainError } from '@billing/contracts';
import type { Backends } from '../backends/clients.js';
import { MerchantAccess } from './access.js';
import { callScope, credentialScope, merchantCallScope } from './call-scope.js';
import type { Principal } from './principal.js';

const OWN = '6f1c2d3e-4a5b-4c6d-8e7f-8091a2b3c4d5';
const OTHER = '3f0e8a52-9c4b-4d7e-8a1f-6b2c9d4e5f01';
const existing = new Set([OWN, OTHER]);
// Billing as MerchantAccess sees it: GetMerchant answers for the existing merchants only.
const access = new MerchantAccess({
  billing: {
    merchants: {
      GetMerchant: async ({ id }: { id: string }) => {
        if (!existing.has(id)) throw new DomainError('merchant_not_found', 'Merchant not found.');
        return { id };
      },
    },
  },
} as unknown as Backends);

const apiKey: Principal = { kind: 'apiKey', apiKeyId: 'k', merchantId: OWN };
const admin: Principal = { kind: 'admin' };
const customer: Principal = { kind: 'customer', accountId: 'c' };
const codeOf = (p: Promise<unknown>) => p.then(() => 'none', (e) => (e instanceof DomainError ? e.code : 'other'));

describe('the scope of internal calls, from the credential', () => {
  it('a merchant credential acts for its merchant; the platform admin for the platform; a customer for none', async () => {
    expect(credentialScope(apiKey)).toEqual({ merchantId: OWN });
    expect(credentialScope({ kind: 'checkout', sessionId: 's', merchantId: OWN })).toEqual({ merchantId: OWN });
    expect(credentialScope(admin)).toEqual({ platform: {} });
    expect(() => credentialScope(customer)).toThrow(DomainError);
    expect(await callScope(access, admin)).toEqual({ platform: {} });
  });

  it('a named merchant is checked first (403 another, 404 unknown), then is the scope', async () => {
    expect(await callScope(access, admin, OTHER)).toEqual({ merchantId: OTHER });
    expect(await codeOf(callScope(access, apiKey, OTHER))).toBe('forbidden');
    expect(await codeOf(callScope(access, admin, '0b6f3b1e-8a4f-4c47-9a52-1f0e0c6d2a11'))).toBe('merchant_not_found');
  });

  it('calls inside one merchant never get the platform scope: the admin must name a merchant', async () => {
    expect(await merchantCallScope(access, apiKey)).toEqual({ merchantId: OWN });
    expect(await merchantCallScope(access, admin, OTHER)).toEqual({ merchantId: OTHER });
    expect(await codeOf(merchantCallScope(access, admin))).toBe('validation_failed');
  });
});
