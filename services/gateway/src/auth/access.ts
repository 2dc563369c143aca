import { DomainError, roleAtLeast, type MerchantRole } from '@billing/contracts';
import { PLATFORM_SCOPE } from '@billing/service-runtime';
import type { Backends } from '../backends/clients.js';
import { merchantOf, type Principal, type PrincipalKind } from './principal.js';

/**
 * What a route requires of its caller. `merchant` means a merchant credential (API key or
 * merchant user) or the platform admin, and names the least merchant-user role allowed;
 * `apiKeys: false` leaves API keys out (a credential of the wrong kind, 401).
 */
export type AuthRequirement =
  | { anonymous: true }
  | { admin: true }
  | { merchant: MerchantRole; apiKeys?: false }
  | { customer: true }
  | { checkout: true };

/** API keys are integration credentials with the reach of an Admin user. */
const API_KEY_ROLE: MerchantRole = 'Admin';

/** Refuses a credential of the wrong kind (401) or too low a role (403). */
export function authorize(principal: Principal | undefined, req: AuthRequirement): void {
  if ('anonymous' in req) return;
  if (!principal) throw new DomainError('unauthenticated', 'A valid bearer credential is required.');
  const allowed: PrincipalKind[] =
    'admin' in req ? ['admin'] : 'merchant' in req ? (req.apiKeys === false ? ['admin', 'merchantUser'] : ['admin', 'apiKey', 'merchantUser']) : 'customer' in req ? ['customer'] : ['checkout'];
  if (!allowed.includes(principal.kind)) throw new DomainError('unauthenticated', 'This credential cannot be used for this endpoint.');
  if ('merchant' in req) {
    const role = principal.kind === 'merchantUser' ? principal.role : principal.kind === 'apiKey' ? API_KEY_ROLE : 'Owner';
    if (!roleAtLeast(role, req.merchant)) throw new DomainError('forbidden', `This operation requires the ${req.merchant} role or above.`);
  }
}

/**
 * Decides whether the caller may act for a merchant named in the request: its own merchant
 * passes; another merchant is 403 when it exists and 404 when it does not; the platform admin
 * may name any existing merchant.
 */
export class MerchantAccess {
  private readonly known = new Map<string, number>();

  constructor(private readonly backends: Backends) {}

  async assert(principal: Principal, merchantId: string): Promise<void> {
    const own = merchantOf(principal);
    if (own && own === merchantId.toLowerCase()) return;
    const exists = await this.exists(merchantId);
    if (!exists) throw new DomainError('merchant_not_found', 'Merchant not found.');
    if (principal.kind !== 'admin') throw new DomainError('forbidden', 'The credential belongs to a different merchant.');
  }

  /** The merchant the caller acts for: the one named, or the credential's own when none is named. */
  async resolve(principal: Principal, named: string | undefined): Promise<string> {
    if (named) {
      await this.assert(principal, named);
      return named.toLowerCase();
    }
    const own = merchantOf(principal);
    if (!own) throw DomainError.field('merchantId', 'merchantId is required.');
    return own;
  }

  private async exists(merchantId: string): Promise<boolean> {
    const seen = this.known.get(merchantId);
    if (seen && Date.now() - seen < 60_000) return true;
    try {
      // The gateway's own check of a merchant the caller named (not the caller's data): it
      // learns only whether the merchant exists, which the 403/404 answers reveal anyway.
      await this.backends.billing.merchants.GetMerchant({ scope: PLATFORM_SCOPE, id: merchantId });
      this.known.set(merchantId, Date.now());
      return true;
    } catch (e) {
      if (e instanceof DomainError && (e.code === 'merchant_not_found' || e.code === 'not_found')) return false;
      throw e;
    }
  }
}
