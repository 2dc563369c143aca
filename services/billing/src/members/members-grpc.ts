import { type EntityManager, type MikroORM } from '@mikro-orm/postgresql';
import { CreateMemberRequest, pageWindow, parseOrThrow } from '@billing/contracts';
import type { ServiceImpl } from '@billing/service-runtime';
import { findScoped } from '../merchant-scope.js';
import { byEmail, memberCreation } from './create-member.js';
import { Member } from './member.js';

/** A member addressed by id: another merchant's member is indistinguishable from a missing one. */
export function findMember(em: EntityManager, ref: { merchantId: string; id: string }, opts: { lock?: boolean } = {}): Promise<Member> {
  return findScoped(em, Member, ref, 'Member', opts);
}

export function membersGrpc(orm: MikroORM): ServiceImpl<'billing.v1.Members'> {
  const createMember = memberCreation(orm);
  return {
    /**
     * Returns the existing member of that email unchanged, or creates one and records
     * `member.created` in the same transaction; concurrent creates of one email make one member.
     */
    CreateMember: async (req) => {
      const input = parseOrThrow(CreateMemberRequest, req);
      return createMember({ ...input, merchantId: input.merchantId.toLowerCase() });
    },

    GetMember: async (req) => (await findMember(orm.em.fork(), req)).toMessage(),

    ListMembers: async (req) => {
      const where = req.email ? byEmail(req.merchantId, req.email) : { merchantId: req.merchantId };
      const [items, total] = await orm.em.fork().findAndCount(Member, where, { orderBy: { createdAt: 'asc', id: 'asc' }, ...pageWindow(req) });
      return { items: items.map((m) => m.toMessage()), totalCount: total };
    },
  };
}
