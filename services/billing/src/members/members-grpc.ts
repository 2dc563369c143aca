import { ForeignKeyConstraintViolationException, raw, UniqueConstraintViolationException, type EntityManager, type MikroORM } from '@mikro-orm/postgresql';
import { CreateMemberRequest, DomainError, pageWindow, parseOrThrow } from '@billing/contracts';
import { recordEvent, requireMerchantScope, requireScope, type CallScope, type ServiceImpl } from '@billing/service-runtime';
import { findScoped } from '../merchant-scope.js';
import { Member } from './member.js';

/** A member addressed by id: another merchant's member is indistinguishable from a missing one. */
export function findMember(em: EntityManager, scope: CallScope, id: string, opts: { lock?: boolean } = {}): Promise<Member> {
  return findScoped(em, Member, scope, id, 'Member', opts);
}

/** Exact email match, case-insensitive (served by the unique index on lower(email)). */
function byEmail(merchantId: string, email: string) {
  return { merchantId, [raw((alias) => `lower(${alias}.email)`)]: email.trim().toLowerCase() };
}

export function membersGrpc(orm: MikroORM): ServiceImpl<'billing.v1.Members'> {
  return {
    /**
     * Returns the existing member of that email unchanged, or creates one and records
     * `member.created` in the same transaction. Two concurrent creates race on the unique index:
     * the loser's insert fails and it answers with the winner's member.
     */
    CreateMember: async (req) => {
      const merchantId = requireMerchantScope(req.scope);
      const input = parseOrThrow(CreateMemberRequest, { ...req, merchantId });
      const existing = await orm.em.fork().findOne(Member, byEmail(merchantId, input.email));
      if (existing) return { member: existing.toMessage(), created: false };
      try {
        const member = await orm.em.fork().transactional(async (em) => {
          const m = Member.create({ ...input, merchantId });
          em.persist(m);
          recordEvent(em, { type: 'member.created', merchantId, data: toMemberEvent(m) });
          return m;
        });
        return { member: member.toMessage(), created: true };
      } catch (e) {
        if (e instanceof ForeignKeyConstraintViolationException) throw new DomainError('merchant_not_found', 'Merchant not found.');
        if (!(e instanceof UniqueConstraintViolationException)) throw e;
        const winner = await orm.em.fork().findOne(Member, byEmail(merchantId, input.email));
        if (!winner) throw e;
        return { member: winner.toMessage(), created: false };
      }
    },

    GetMember: async (req) => (await findMember(orm.em.fork(), requireScope(req.scope), req.id)).toMessage(),

    ListMembers: async (req) => {
      const merchantId = requireMerchantScope(req.scope);
      const where = req.email ? byEmail(merchantId, req.email) : { merchantId };
      const [items, total] = await orm.em.fork().findAndCount(Member, where, { orderBy: { createdAt: 'asc', id: 'asc' }, ...pageWindow(req) });
      return { items: items.map((m) => m.toMessage()), totalCount: total };
    },
  };
}

/** `member.created` data: the member as the REST API shows it. */
export function toMemberEvent(m: Member): Record<string, unknown> {
  return { ...m.toMessage(), phone: m.phone };
}
