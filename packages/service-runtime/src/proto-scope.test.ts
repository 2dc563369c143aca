import { readdirSync } from 'node:fs';
import { join } from 'node:path';
import { loadSync } from '@grpc/proto-loader';
import { describe, expect, it } from 'vitest';
import { PROTO_ROOT } from './grpc.js';

/**
 * The RPCs whose requests carry no `common.v1.Scope`, each with why it reads or changes no
 * merchant's data in a way a scope could bound. Every other RPC's request must have a `scope`
 * field, so a new RPC cannot fall back to "an empty merchant id means every merchant".
 */
const SCOPE_FREE: Record<string, string> = {
  'grpc.health.v1.Health/Check': "the service's own health",
  'grpc.health.v1.Health/Watch': "the service's own health",
  'common.v1.Gathered/Call': "an envelope: each call in it carries its own method's request, scope included, and is checked as that method",
  'checkout.v1.Checkout/ResolveLink': 'anonymous: the signed link is the credential and names its merchant',
  'checkout.v1.Pages/GetPageAsset': 'public page assets',
  'checkout.v1.Onboarding/PreviewInvitation': 'anonymous: the invitation token is the credential',
  'checkout.v1.Onboarding/AcceptInvitation': "the invited customer's own account (account_id) and the invitation token",
  'checkout.v1.Onboarding/GetOnboarding': "the invited customer's own account (account_id)",
  'checkout.v1.Onboarding/SaveDetails': "the invited customer's own account (account_id)",
  'checkout.v1.Onboarding/SavePaymentMethod': "the invited customer's own account (account_id)",
  'checkout.v1.Onboarding/ChoosePlan': "the invited customer's own account (account_id)",
  'checkout.v1.Onboarding/SaveAnswers': "the invited customer's own account (account_id)",
  'checkout.v1.Onboarding/CompleteOnboarding': "the invited customer's own account (account_id)",
  'identity.v1.ApiKeys/AuthenticateApiKey': 'authentication by the key itself, before any scope exists',
  'identity.v1.ApiKeys/RecordApiKeyUsage': "the gateway's batched lastUsedAt of keys it has just authenticated",
  'identity.v1.MerchantUsers/LoginMerchantUser': 'authentication by email and password',
  'identity.v1.Credentials/GetJwks': 'public verification keys',
  'identity.v1.Credentials/ListCredentialChanges': "the platform's revocation feed for verifiers",
  ...Object.fromEntries(
    [
      'SignUpCustomer',
      'LoginCustomer',
      'GetCustomerAccount',
      'UpdateCustomerProfile',
      'RequestPasswordReset',
      'IssuePasswordReset',
      'ResetPassword',
      'VerifyEmail',
      'SuspendCustomerAccount',
      'UnsuspendCustomerAccount',
      'EnsureCustomerAccount',
    ].map((m) => [`identity.v1.Customers/${m}`, 'customer accounts belong to no merchant (one per email across merchants)']),
  ),
};

function rpcs(): { name: string; fields: { name: string; typeName?: string }[] }[] {
  const files = readdirSync(PROTO_ROOT, { recursive: true, encoding: 'utf8' }).filter((f) => f.endsWith('.proto'));
  const defs = loadSync(files, { includeDirs: [PROTO_ROOT] });
  const out: { name: string; fields: { name: string; typeName?: string }[] }[] = [];
  for (const [service, def] of Object.entries(defs)) {
    if ('format' in def) continue; // a message or enum, not a service
    for (const [method, m] of Object.entries(def as Record<string, { requestType: { type: { field: { name: string; typeName?: string }[] } } }>)) {
      out.push({ name: `${service}/${method}`, fields: m.requestType.type.field });
    }
  }
  return out;
}

describe('internal requests name their scope', () => {
  const all = rpcs();

  it('finds the services', () => {
    expect(all.map((r) => r.name)).toContain('billing.v1.Members/ListMembers');
    expect(all.length).toBeGreaterThan(60);
  });

  it('every RPC that touches tenant data has `common.v1.Scope scope`', () => {
    const missing = all.filter((r) => !SCOPE_FREE[r.name] && !r.fields.some((f) => f.name === 'scope' && f.typeName?.replace(/^\./, '') === 'common.v1.Scope'));
    expect(missing.map((r) => r.name)).toEqual([]);
  });

  it('lists no scope-free RPC that no longer exists or has gained a scope', () => {
    const byName = new Map(all.map((r) => [r.name, r]));
    const stale = Object.keys(SCOPE_FREE).filter((n) => !byName.has(n) || byName.get(n)!.fields.some((f) => f.name === 'scope'));
    expect(stale).toEqual([]);
  });
});
