import type { MikroORM } from '@mikro-orm/postgresql';
import { DomainError } from '@billing/contracts';
import { requireScope, type ServiceImpl } from '@billing/service-runtime';
import { Merchant } from '../merchants/merchant.js';
import type { PaymentProviders } from './payment-providers.js';

/**
 * `billing.v1.ProviderTokens`: tokenises raw details at the merchant's provider (the one its
 * `providerEnvironment` selects), so callers never talk to providers themselves. The account
 * number passes through and is neither stored nor logged here.
 */
export function providerTokensGrpc(orm: MikroORM, providers: PaymentProviders): ServiceImpl<'billing.v1.ProviderTokens'> {
  return {
    TokeniseBankAccount: async (req) => {
      const scope = requireScope(req.scope);
      if (scope.kind !== 'merchant') throw new DomainError('bad_request', 'Tokens belong to one merchant: call with a merchant scope.');
      const merchant = await orm.em.fork().findOne(Merchant, { id: scope.merchantId });
      if (!merchant) throw new DomainError('merchant_not_found', 'Merchant not found.');
      const t = await providers.forEnvironment(merchant.providerEnvironment).tokeniseBankAccount(merchant.id, {
        accountName: req.accountName,
        bsb: req.bsb,
        accountNumber: req.accountNumber,
      });
      return { token: t.token, accountName: t.accountName ?? req.accountName, bsb: t.bsb ?? req.bsb, last4: t.last4 };
    },
  };
}
