import { ForeignKeyConstraintViolationException, raw, UniqueConstraintViolationException, type EntityManager, type MikroORM } from '@mikro-orm/postgresql';
import { DomainError, type CreateMemberRequest } from '@billing/contracts';
import { GroupWrite, recordEvent } from '@billing/service-runtime';
import { Member } from './member.js';

/** How a member is found by email: its merchant and the email trimmed and lower-cased (the unique index is on lower(email)). */
const emailKey = (merchantId: string, email: string) => `${merchantId}|${email.trim().toLowerCase()}`;

/** Exact email match, case-insensitive (served by the unique index on lower(email)). */
export function byEmail(merchantId: string, email: string) {
  return { merchantId, [raw((alias) => `lower(${alias}.email)`)]: email.trim().toLowerCase() };
}

/** `member.created` data: the member as the REST API shows it. */
export function toMemberEvent(m: Member): Record<string, unknown> {
  return { ...m.toMessage(), phone: m.phone };
}

type NewMember = CreateMemberRequest & { merchantId: string };

/**
 * Create-member, group-committed: the creates that arrive together share one lookup of their
 * emails and one transaction inserting the new members and their `member.created` events.
 * Answers the existing member of that email unchanged (`created: false`), or the new one.
 * Creates of one email never share a batch; two that race from different batches (or replicas)
 * meet the unique index, and the loser answers with the winner's member.
 */
export function memberCreation(orm: MikroORM): (input: NewMember) => Promise<{ member: ReturnType<Member['toMessage']>; created: boolean }> {
  const creates = new GroupWrite(
    orm,
    {
      load: async (em: EntityManager, items: readonly NewMember[]) => {
        const found = await em.find(Member, {
          merchantId: { $in: [...new Set(items.map((i) => i.merchantId))] },
          [raw((alias) => `lower(${alias}.email)`)]: { $in: [...new Set(items.map((i) => i.email.trim().toLowerCase()))] },
        });
        return new Map(found.map((m) => [emailKey(m.merchantId, m.email), m]));
      },
      apply: (em: EntityManager, input: NewMember, existing: Map<string, Member>) => {
        const found = existing.get(emailKey(input.merchantId, input.email));
        if (found) return { member: found.toMessage(), created: false };
        const m = Member.create(input);
        em.persist(m);
        recordEvent(em, { type: 'member.created', merchantId: m.merchantId, data: toMemberEvent(m) });
        return { member: m.toMessage(), created: true };
      },
    },
    { keyOf: (i) => emailKey(i.merchantId, i.email) },
  );

  return async (input) => {
    try {
      return await creates.run(input);
    } catch (e) {
      if (e instanceof ForeignKeyConstraintViolationException) throw new DomainError('merchant_not_found', 'Merchant not found.');
      if (!(e instanceof UniqueConstraintViolationException)) throw e;
      const winner = await orm.em.fork().findOne(Member, byEmail(input.merchantId, input.email));
      if (!winner) throw e;
      return { member: winner.toMessage(), created: false };
    }
  };
}
