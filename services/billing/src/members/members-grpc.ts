import { type EntityManager, type MikroORM } from '@mikro-orm/postgresql';
import { CreateMemberRequest, pageWindow, parseOrThrow } from '@billing/contracts';
import { requireMerchantScope, requireScope, type CallScope, type ServiceImpl } from '@billing/service-runtime';
import { findScoped } from '../merchant-scope.js';
import { byEmail, memberCreation } from './create-member.js';
import { Member } from './member.js';

/** A member addressed by id: another merchant's member is indistinguishable from a missing one. */
export function findMember(em: EntityManager, scope: CallScope, id: string, opts: { lock?: boolean } = {}): Promise<Member> {
  return findScoped(em, Member, scope, id, 'Member', opts);
}

/** `createMember`: the member writer, shared with the enrolments when the app passes it (one batcher for both). */
export function membersGrpc(orm: MikroORM, createMember = memberCreation(orm)): ServiceImpl<'billing.v1.Members'> {
  return {
    /**
     * Returns the existing member of that email unchanged, or creates one and records
     * `member.created` in the same transaction; concurrent creates of one email make one member.
     */
    CreateMember: async (req) => {
      const merchantId = requireMerchantScope(req.scope);
      const input = parseOrThrow(CreateMemberRequest, { ...req, merchantId });
      return createMember({ ...input, merchantId });
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
