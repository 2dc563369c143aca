import type { MikroORM } from '@mikro-orm/postgresql';
import { CreateInvitationRequest, DomainError, parseOrThrow } from '@billing/contracts';
import { Batcher, deliveryFailureForLog, queryPrepared, scopeOfMerchant, type CallScope, type DeliveryChannels, type Logger } from '@billing/service-runtime';
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
 * Mints an invitation and delivers its link: by email when there is an email, and by SMS when
 * there is a phone and an SMS channel; then gives an email without a customer account an
 * unclaimed one. Only a phone and no SMS channel is unprocessable (`NoDeliveryChannel`).
 *
 * Delivered or not created: the invitation is stored before its link goes out (so the link
 * works the moment it arrives), and removed again when its first channel fails, which is then
 * `delivery_failed` (502) with nothing left behind, no account either, so a retry makes one
 * invitation, not a second. Once the link has gone out by one channel the invitation stands: a
 * failing SMS after a sent email, or identity failing to ensure the account (signup creates it
 * anyway), is logged, not answered.
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
  // Asked before anything is stored or sent: a request for a missing merchant must create
  // nothing. The cache makes the wait rare.
  const merchantName = await deps.merchantNames.nameOf(merchantId);
  const email = input.email ?? null;
  const phone = input.phone ?? null;
  const sms = phone ? deps.channels.sms : undefined;
  if (!email && !sms) {
    throw new DomainError('unprocessable', 'Only a phone was given and no SMS channel is configured; supply an email.', { outcome: 'NoDeliveryChannel' });
  }

  const issued = Invitation.issue({ merchantId, firstName: input.firstName, lastName: input.lastName, email, phone, expiresInDays: input.expiresInDays ?? deps.defaultExpiryDays });
  await deps.inserts.submit(issued.invitation);

  const link = onboardingLink(deps.publicBaseUrl, issued.token);
  const { invitation } = issued;
  const deliveries: { channel: 'email' | 'sms'; send: () => Promise<void> }[] = [];
  if (email) deliveries.push({ channel: 'email', send: () => deps.channels.email.send(invitationEmail({ to: email, firstName: invitation.firstName, merchantName, link, expiresAt: invitation.expiresAt })) });
  if (sms && phone) deliveries.push({ channel: 'sms', send: () => sms.send(invitationSms({ to: phone, merchantName, link })) });
  let delivered = 0;
  for (const { channel, send } of deliveries) {
    try {
      await send();
      delivered++;
    } catch (e) {
      const failure = deliveryFailureForLog(e);
      if (delivered > 0) {
        deps.logger.warn({ invitationId: invitation.id, merchantId, channel, delivery: failure }, 'invitation sent, but not by every channel');
        continue;
      }
      deps.logger.error({ invitationId: invitation.id, merchantId, channel, delivery: failure }, 'could not send an invitation: it was not created');
      await withdraw(deps, invitation);
      throw new DomainError(
        'delivery_failed',
        `The invitation could not be delivered by ${channel === 'email' ? 'email' : 'SMS'} (the ${channel === 'email' ? 'mail server' : 'SMS provider'} refused or failed it), so it was not created: nothing was stored. Check the ${channel === 'email' ? 'email address' : 'phone number'}, or retry later.`,
      );
    }
  }
  if (email) {
    await deps.backends.customers.EnsureCustomerAccount({ email, firstName: input.firstName, lastName: input.lastName, phone: phone ?? undefined }).catch((e: unknown) => {
      deps.logger.warn({ invitationId: invitation.id, merchantId, err: e }, 'invitation sent, but its unclaimed customer account was not created (signup will create it)');
    });
  }
  deps.logger.info({ invitationId: invitation.id, merchantId, email: Boolean(email), sms: Boolean(sms) }, 'invitation sent');
  return issued;
}

/** Removes an invitation whose link never went out: nobody holds its token. */
async function withdraw(deps: InvitationDeps, invitation: Invitation): Promise<void> {
  try {
    await deps.orm.em.fork().nativeDelete(Invitation, { id: invitation.id });
  } catch (e) {
    // Left Pending with a token nobody has: harmless, and it expires; the caller still gets delivery_failed.
    deps.logger.error({ invitationId: invitation.id, err: e }, 'could not remove an undelivered invitation');
  }
}
