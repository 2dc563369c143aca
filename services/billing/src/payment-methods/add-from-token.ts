import { UniqueConstraintViolationException, type MikroORM } from '@mikro-orm/postgresql';
import { DomainError } from '@billing/contracts';
import { Batcher, queryPrepared, typedDatabaseError, type CallScope } from '@billing/service-runtime';
import type { ProviderEnvironment } from '../merchants/merchant.js';
import { pickScoped, scopedTo } from '../merchant-scope.js';
import type { PaymentProviders } from '../payment-provider/payment-providers.js';
import type { Appended, AppendRequest } from './append-method.js';
import type { InstrumentDetails } from './payment-method.js';

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
 * is not asked. A concurrent add of the same token is decided by `appendTokenised`.
 */
export function methodFromTokenAdder(orm: MikroORM, providers: PaymentProviders, append: (req: AppendRequest) => Promise<Appended>): (req: AddFromTokenRequest) => Promise<Appended> {
  const ownersOf = tokenOwnerReader(orm);
  return async ({ scope, memberId, providerToken }) => {
    const token = requiredToken(providerToken);
    const { id } = scopedTo(scope, { id: memberId });
    const owner = pickScoped(await ownersOf(id), scope, id, 'Member');
    const details = await instrumentOf(providers, owner, token);
    return appendTokenised(append, { scope, memberId, details, providerToken: token });
  };
}

/** What a provider token stands for, asked of its merchant's provider before the member is known. */
export interface TokenLookup {
  token: string;
  details: InstrumentDetails;
}

/**
 * What a token stands for at the merchant's provider, asked without a member (an enrolment asks
 * while it makes the member): the merchants of the lookups that arrive together are one read.
 * Blank or unknown: validation_failed naming `providerToken`; a missing merchant: not_found.
 */
export function tokenLookup(orm: MikroORM, providers: PaymentProviders): (merchantId: string, providerToken: string) => Promise<TokenLookup> {
  const environments = new Batcher<string, Map<string, ProviderEnvironment>>(async (ids) => {
    const { rows } = await queryPrepared<{ id: string; provider_environment: ProviderEnvironment }>(
      orm,
      'payment_method_token_merchants',
      `select id, provider_environment from merchants where id = any($1::uuid[])`,
      [[...new Set(ids)]],
    );
    const byId = new Map(rows.map((r) => [r.id, r.provider_environment]));
    return ids.map(() => byId);
  });
  return async (merchantId, providerToken) => {
    const token = requiredToken(providerToken);
    let environment: ProviderEnvironment | undefined;
    try {
      environment = (await environments.submit(merchantId)).get(merchantId);
    } catch (e) {
      throw typedDatabaseError(orm, e);
    }
    if (!environment) throw new DomainError('not_found', 'Merchant not found.');
    return { token, details: await instrumentOf(providers, { merchantId, providerEnvironment: environment }, token) };
  };
}

/**
 * Appends a tokenised method. A concurrent add of the same token that wins the unique index
 * makes this add the repeat it is: it is appended again, and then answers the stored method or
 * is refused.
 */
export async function appendTokenised(append: (req: AppendRequest) => Promise<Appended>, req: AppendRequest & { providerToken: string }): Promise<Appended> {
  try {
    return await append(req);
  } catch (e) {
    if (!(e instanceof UniqueConstraintViolationException)) throw e;
    return append(req);
  }
}

function requiredToken(providerToken: string): string {
  const token = providerToken.trim();
  if (!token) throw DomainError.field('providerToken', 'Required.');
  return token;
}

async function instrumentOf(providers: PaymentProviders, owner: { merchantId: string; providerEnvironment: ProviderEnvironment }, token: string): Promise<InstrumentDetails> {
  const instrument = await providers.forEnvironment(owner.providerEnvironment).lookupToken(owner.merchantId, token);
  if (!instrument) throw DomainError.field('providerToken', 'The payment provider does not know this token.');
  const { token: _token, ...details } = instrument;
  return details;
}
