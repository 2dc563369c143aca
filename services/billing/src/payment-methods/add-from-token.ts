import { UniqueConstraintViolationException, type MikroORM } from '@mikro-orm/postgresql';
import { DomainError } from '@billing/contracts';
import { Batcher, queryPrepared, typedDatabaseError, type CallScope } from '@billing/service-runtime';
import type { ProviderEnvironment } from '../merchants/merchant.js';
import { pickScoped, scopedTo } from '../merchant-scope.js';
import type { PaymentProviders } from '../payment-provider/payment-providers.js';
import type { Appended, AppendRequest } from './append-method.js';

/** A member a token is added to, with what asking its merchant's provider needs. */
interface TokenOwner {
  id: string;
  merchantId: string;
  providerEnvironment: ProviderEnvironment;
}

export interface AddFromTokenRequest {
  scope: CallScope;
  memberId: string;
  providerToken: string;
}

/**
 * The members of from-token adds, each with its merchant's provider environment: the reads that
 * arrive together are one prepared statement (the members joined to their merchants), where each
 * add spent two ORM reads (its member, then its merchant). Every caller gets the whole batch's
 * members, by lower-cased id, each as the statement read it.
 */
function tokenOwnerReader(orm: MikroORM): (memberId: string) => Promise<Map<string, TokenOwner>> {
  const reads = new Batcher<string, Map<string, TokenOwner>>(async (ids) => {
    const { rows } = await queryPrepared<{ id: string; merchant_id: string; provider_environment: ProviderEnvironment }>(
      orm,
      'payment_method_token_owners',
      `select m.id, m.merchant_id, mc.provider_environment from members m join merchants mc on mc.id = m.merchant_id where m.id = any($1::uuid[])`,
      [[...new Set(ids)]],
    );
    const owners = new Map(rows.map((r) => [r.id, { id: r.id, merchantId: r.merchant_id, providerEnvironment: r.provider_environment }]));
    return ids.map(() => owners);
  });
  return async (memberId) => {
    try {
      return await reads.submit(memberId);
    } catch (e) {
      throw typedDatabaseError(orm, e);
    }
  };
}

/**
 * Adds the method a provider token stands for: asks the member's merchant's provider what the
 * token is (on the merchant's account), then appends those details with the token. A blank
 * token, or one the provider does not know for this merchant, is `validation_failed` on
 * `providerToken`; a member outside the scope is `not_found`, as a missing one, and the provider
 * is not asked. A concurrent add of the same token that wins the unique index makes this add
 * the repeat it is: it is appended again, and then answers the stored method or is refused.
 */
export function methodFromTokenAdder(orm: MikroORM, providers: PaymentProviders, append: (req: AppendRequest) => Promise<Appended>): (req: AddFromTokenRequest) => Promise<Appended> {
  const ownersOf = tokenOwnerReader(orm);
  return async ({ scope, memberId, providerToken }) => {
    const token = providerToken.trim();
    if (!token) throw DomainError.field('providerToken', 'Required.');
    const { id } = scopedTo(scope, { id: memberId });
    const owner = pickScoped(await ownersOf(id), scope, id, 'Member');
    const instrument = await providers.forEnvironment(owner.providerEnvironment).lookupToken(owner.merchantId, token);
    if (!instrument) throw DomainError.field('providerToken', 'The payment provider does not know this token.');
    const { token: _token, ...details } = instrument;
    try {
      return await append({ scope, memberId, details, providerToken: token });
    } catch (e) {
      if (!(e instanceof UniqueConstraintViolationException)) throw e;
      return append({ scope, memberId, details, providerToken: token });
    }
  };
}
