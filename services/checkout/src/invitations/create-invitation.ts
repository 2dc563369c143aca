import type { MikroORM } from '@mikro-orm/postgresql';
import { CreateInvitationRequest, DomainError, parseOrThrow } from '@billing/contracts';
import { Batcher, queryPrepared, scopeOfMerchant, type CallScope, type DeliveryChannels, type Logger } from '@billing/service-runtime';
import type { CheckoutBackends } from '../backends.js';
import { Invitation } from './invitation.js';
import { rowOfInvitation } from './invitation-row.js';
import { invitationEmail, invitationSms, onboardingLink } from './invitation-messages.js';
import type { MerchantNames } from './merchant-names.js';

export interface InvitationDeps {
  orm: MikroORM;
  backends: CheckoutBackends;
  channels: DeliveryChannels;
  publicBaseUrl: string;
  defaultExpiryDays: number;
  /** How long a merchant's name read for invitation emails is reused (`CHECKOUT_MERCHANT_CACHE_MS`); 0: not at all. */
  merchantNameCacheMs: number;
  logger: Logger;
}

/**
 * Inserts of invitations that arrive together: one multi-row INSERT, committed on its own (no
 * BEGIN/COMMIT); each invitation resolves once the statement carrying it is durable.
 */
export function invitationInserts(orm: MikroORM): Batcher<Invitation, void> {
  return new Batcher(async (invitations) => {
    // Hand-written: one prepared statement with the batch as one JSON parameter costs a
    // fraction of the CPU of the ORM's insertMany (metadata walk, query builder, SQL text).
    await queryPrepared(
      orm,
      'invitation_insert_batch',
      `insert into invitations (id, merchant_id, token_hash, first_name, last_name, email, phone, expires_at, created_at,
                                account_id, accepted_at, completed_at, revoked_at, member_id, subscription_id)
       select id, merchant_id, token_hash, first_name, last_name, email, phone, expires_at, created_at,
              account_id, accepted_at, completed_at, revoked_at, member_id, subscription_id
         from jsonb_to_recordset($1::jsonb) as i(id uuid, merchant_id uuid, token_hash text, first_name text, last_name text, email text, phone text,
              expires_at timestamptz, created_at timestamptz, account_id uuid, accepted_at timestamptz, completed_at timestamptz, revoked_at timestamptz,
              member_id uuid, subscription_id uuid)`,
      [JSON.stringify(invitations.map(rowOfInvitation))],
    );
    return invitations.map(() => undefined);
  });
}

/** The merchant's name, or merchant_not_found carrying the outcome `MerchantNotFound`. */
export async function merchantNameOf(backends: CheckoutBackends, merchantId: string): Promise<string> {
  try {
    return (await backends.merchants.GetMerchant({ scope: scopeOfMerchant(merchantId), id: merchantId })).name;
  } catch (e) {
    if (e instanceof DomainError && (e.code === 'not_found' || e.code === 'merchant_not_found')) {
      throw new DomainError('merchant_not_found', 'Merchant not found.', { outcome: 'MerchantNotFound' });
    }
    throw e;
  }
}

/**
 * Mints an invitation and delivers its link: by email when there is an email (creating an
 * unclaimed customer account for an email without one), and by SMS when there is a phone and an
 * SMS channel. Only a phone and no SMS channel is unprocessable (`NoDeliveryChannel`).
 */
export async function createInvitation(
  deps: InvitationDeps & { inserts: Batcher<Invitation, void>; merchantNames: MerchantNames },
  scope: CallScope,
  req: { merchantId: string; firstName: string; lastName: string; email?: string; phone?: string; expiresInDays?: number },
): Promise<{ invitation: Invitation; token: string }> {
  const input = parseOrThrow(CreateInvitationRequest, {
    merchantId: req.merchantId,
    firstName: req.firstName,
    lastName: req.lastName,
    email: req.email ?? null,
    phone: req.phone ?? null,
    expiresInDays: req.expiresInDays ?? null,
  });
  const merchantId = input.merchantId.toLowerCase();
  if (scope.kind === 'merchant' && scope.merchantId !== merchantId) throw new DomainError('forbidden', 'The credential belongs to a different merchant.');
  // Asked before the account is ensured, not at the same time: a request for a missing merchant
  // must create no account. The cache makes the wait rare.
  const merchantName = await deps.merchantNames.nameOf(merchantId);
  const email = input.email ?? null;
  const phone = input.phone ?? null;
  const sms = phone ? deps.channels.sms : undefined;
  if (!email && !sms) {
    throw new DomainError('unprocessable', 'Only a phone was given and no SMS channel is configured; supply an email.', { outcome: 'NoDeliveryChannel' });
  }
  if (email) await deps.backends.customers.EnsureCustomerAccount({ email, firstName: input.firstName, lastName: input.lastName, phone: phone ?? undefined });

  const issued = Invitation.issue({ merchantId, firstName: input.firstName, lastName: input.lastName, email, phone, expiresInDays: input.expiresInDays ?? deps.defaultExpiryDays });
  await deps.inserts.submit(issued.invitation);

  const link = onboardingLink(deps.publicBaseUrl, issued.token);
  const { invitation } = issued;
  if (email) await deps.channels.email.send(invitationEmail({ to: email, firstName: invitation.firstName, merchantName, link, expiresAt: invitation.expiresAt }));
  if (sms && phone) await sms.send(invitationSms({ to: phone, merchantName, link }));
  deps.logger.info({ invitationId: invitation.id, merchantId, email: Boolean(email), sms: Boolean(sms) }, 'invitation sent');
  return issued;
}
