import { LockMode, type EntityManager, type FilterQuery } from '@mikro-orm/postgresql';
import { DomainError, INVITATION_STATUSES, isUuidText, pageWindow, type InvitationStatus } from '@billing/contracts';
import { emailInAnyCase, queryRows, requireScope, type CallScope, type ServiceImpl } from '@billing/service-runtime';
import { createInvitation, invitationInserts, merchantNameOf, type InvitationDeps } from './create-invitation.js';
import { Invitation } from './invitation.js';
import { MerchantNames } from './merchant-names.js';

/** One invitation the scope may see, optionally row-locked; any other is not_found. */
export async function findInvitation(em: EntityManager, scope: CallScope, id: string, opts: { lock?: boolean } = {}): Promise<Invitation> {
  if (!isUuidText(id)) throw new DomainError('not_found', 'Invitation not found.');
  const where: FilterQuery<Invitation> = scope.kind === 'merchant' ? { id: id.toLowerCase(), merchantId: scope.merchantId } : { id: id.toLowerCase() };
  const found = await em.findOne(Invitation, where, opts.lock ? { lockMode: LockMode.PESSIMISTIC_WRITE } : {});
  if (!found) throw new DomainError('not_found', 'Invitation not found.');
  return found;
}

/** Whether a completion of the invitation's wizard holds its lease (it is enrolling the customer in billing). */
async function completionInProgress(em: EntityManager, invitationId: string): Promise<boolean> {
  const rows = await queryRows(em, `select 1 from onboardings where invitation_id = ? and completed_at is null and completion_lease_until > now()`, [invitationId]);
  return rows.length > 0;
}

/** The stored conditions of a status (Expired and Pending/Accepted depend on the clock). */
function statusFilter(status: InvitationStatus, now: Date): FilterQuery<Invitation> {
  switch (status) {
    case 'Completed':
      return { completedAt: { $ne: null } };
    case 'Revoked':
      return { completedAt: null, revokedAt: { $ne: null } };
    case 'Expired':
      return { completedAt: null, revokedAt: null, expiresAt: { $lte: now } };
    case 'Accepted':
      return { completedAt: null, revokedAt: null, expiresAt: { $gt: now }, acceptedAt: { $ne: null } };
    case 'Pending':
      return { completedAt: null, revokedAt: null, expiresAt: { $gt: now }, acceptedAt: null };
  }
}

/** The order of `ListInvitations`, newest first, which its indexes by merchant (and email) hold. */
export const INVITATION_LIST_ORDER = { createdAt: 'desc', id: 'asc' } as const;

/** The merchant's invitations `ListInvitations` answers: of `status` at `now`, and of `email` compared case-insensitively. */
export function invitationListFilter(merchantId: string, by: { status?: InvitationStatus; email?: string }, now: Date): FilterQuery<Invitation> {
  const filters: FilterQuery<Invitation>[] = [{ merchantId }];
  if (by.status) filters.push(statusFilter(by.status, now));
  if (by.email) filters.push(emailInAnyCase(by.email));
  return filters.length === 1 ? filters[0]! : { $and: filters };
}

export function invitationsGrpc(deps: InvitationDeps): ServiceImpl<'checkout.v1.Invitations'> {
  const { orm } = deps;
  const inserts = invitationInserts(orm);
  const merchantNames = new MerchantNames((merchantId) => merchantNameOf(deps.backends, merchantId), deps.merchantNameCacheMs);
  return {
    CreateInvitation: async (req) => {
      const { invitation, token } = await createInvitation({ ...deps, inserts, merchantNames }, requireScope(req.scope), {
        merchantId: req.merchantId,
        firstName: req.firstName,
        lastName: req.lastName,
        email: req.email,
        phone: req.phone,
        expiresInDays: req.expiresInDays,
      });
      return { invitation: invitation.toMessage(), token };
    },

    GetInvitation: async (req) => (await findInvitation(orm.em.fork(), requireScope(req.scope), req.id)).toMessage(),

    ListInvitations: async (req) => {
      const scope = requireScope(req.scope);
      const merchantId = req.merchantId.toLowerCase();
      if (!isUuidText(merchantId)) throw DomainError.field('merchantId', 'Must be a valid UUID.');
      if (scope.kind === 'merchant' && scope.merchantId !== merchantId) throw new DomainError('forbidden', 'The credential belongs to a different merchant.');
      if (req.status && !(INVITATION_STATUSES as readonly string[]).includes(req.status)) throw DomainError.field('status', `Must be one of ${INVITATION_STATUSES.join(', ')}.`);
      const now = new Date();
      const where = invitationListFilter(merchantId, { status: req.status as InvitationStatus | undefined, email: req.email }, now);
      const { limit, offset } = pageWindow(req);
      const [items, totalCount] = await orm.em.fork().findAndCount(Invitation, where, { orderBy: INVITATION_LIST_ORDER, limit, offset });
      return { items: items.map((i) => i.toMessage(now)), totalCount };
    },

    RevokeInvitation: async (req) => {
      const scope = requireScope(req.scope);
      return orm.em.fork().transactional(async (em) => {
        const invitation = await findInvitation(em, scope, req.id, { lock: true });
        // Under the invitation's lock, which a completion's lease take shares (completion-store
        // `takeWizard`): either the completion holds its lease now, or it will find the revocation.
        if (!invitation.completedAt && !invitation.revokedAt && (await completionInProgress(em, invitation.id))) {
          throw new DomainError('conflict', 'The invitation is being completed right now; it cannot be revoked. Look it up again shortly: once completed it stays completed.');
        }
        invitation.revoke();
        return invitation.toMessage();
      });
    },
  };
}
