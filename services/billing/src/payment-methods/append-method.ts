import type { EntityManager, MikroORM } from '@mikro-orm/postgresql';
import { DomainError } from '@billing/contracts';
import { GroupWrite, recordEvent, type CallScope } from '@billing/service-runtime';
import { Member } from '../members/member.js';
import { findManyById, pickScoped } from '../merchant-scope.js';
import { PaymentMethod, type InstrumentDetails } from './payment-method.js';
import { nextRank } from './ranking.js';

export interface AppendRequest {
  scope: CallScope;
  memberId: string;
  details: InstrumentDetails;
  /** The provider token the details came from, or null for a client-side tokenisation result. */
  providerToken: string | null;
}

interface Loaded {
  members: Map<string, Member>;
  methods: Map<string, PaymentMethod[]>;
  byToken: Map<string, PaymentMethod[]>;
}

/**
 * Appends a method at its member's lowest rank and records `payment_method.added`, in a
 * transaction holding the member's row lock (so concurrent adds get distinct ranks); the adds
 * that arrive together share that transaction and one read of their members and methods. Adds
 * for one member never share a batch. A provider token already stored for the same member
 * answers that method (`created: false`); for another member it is refused.
 */
export function methodAppender(orm: MikroORM): (req: AppendRequest) => Promise<{ paymentMethod: ReturnType<PaymentMethod['toMessage']>; created: boolean }> {
  const appends = new GroupWrite(
    orm,
    {
      load: async (em: EntityManager, items: readonly AppendRequest[]): Promise<Loaded> => {
        const members = await findManyById(em, Member, items.map((i) => i.memberId), { lock: true });
        const methods = new Map<string, PaymentMethod[]>();
        const byToken = new Map<string, PaymentMethod[]>();
        const tokens = [...new Set(items.flatMap((i) => i.providerToken ?? []))];
        const found = members.size ? await em.find(PaymentMethod, { memberId: { $in: [...members.keys()] } }) : [];
        const tokened = tokens.length ? await em.find(PaymentMethod, { providerToken: { $in: tokens } }) : [];
        for (const pm of found) methods.set(pm.memberId, [...(methods.get(pm.memberId) ?? []), pm]);
        for (const pm of tokened) byToken.set(pm.providerToken!, [...(byToken.get(pm.providerToken!) ?? []), pm]);
        return { members, methods, byToken };
      },
      apply: (em: EntityManager, req: AppendRequest, { members, methods, byToken }: Loaded) => {
        const member = pickScoped(members, req.scope, req.memberId, 'Member');
        if (req.providerToken) {
          const existing = (byToken.get(req.providerToken) ?? []).find((pm) => pm.merchantId === member.merchantId);
          if (existing && existing.memberId === member.id) return { paymentMethod: existing.toMessage(), created: false };
          if (existing) throw DomainError.field('providerToken', 'This token is already used by another member.');
        }
        const pm = PaymentMethod.create({ ...req.details, merchantId: member.merchantId, memberId: member.id, rank: nextRank(methods.get(member.id) ?? []), providerToken: req.providerToken });
        em.persist(pm);
        recordEvent(em, { type: 'payment_method.added', merchantId: member.merchantId, data: pm.toView() });
        return { paymentMethod: pm.toMessage(), created: true };
      },
    },
    { keyOf: (req) => req.memberId.toLowerCase() },
  );
  return (req) => appends.run(req);
}
