import { LockMode, type EntityManager, type MikroORM } from '@mikro-orm/postgresql';
import { AddPaymentMethodRequest, DomainError, parseOrThrow } from '@billing/contracts';
import { requireScope, type ServiceImpl } from '@billing/service-runtime';
import { findMember } from '../members/members-grpc.js';
import type { Member } from '../members/member.js';
import { scopedTo } from '../merchant-scope.js';
import type { PaymentProviders } from '../payment-provider/payment-providers.js';
import { methodFromTokenAdder } from './add-from-token.js';
import { methodAppender } from './append-method.js';
import { PaymentMethod, type InstrumentDetails } from './payment-method.js';
import { byRank, rerank } from './ranking.js';

/** An instrument's details as a client-side tokenisation gives them, checked (validation_failed naming each bad field). */
export function instrumentDetailsOf(req: { type: string; brand?: string; last4: string; expiryMonth?: number; expiryYear?: number; accountName?: string; bsb?: string }): InstrumentDetails {
  const input = parseOrThrow(AddPaymentMethodRequest, {
    type: req.type,
    brand: req.brand,
    last4: req.last4,
    expiryMonth: req.expiryMonth,
    expiryYear: req.expiryYear,
    accountName: req.accountName,
    bsb: req.bsb,
  });
  return {
    type: input.type,
    brand: input.brand ?? null,
    last4: input.last4,
    expiryMonth: input.expiryMonth ?? null,
    expiryYear: input.expiryYear ?? null,
    accountName: input.accountName ?? null,
    bsb: input.bsb ?? null,
  };
}

export async function methodsOf(em: EntityManager, member: Member, lock = false): Promise<PaymentMethod[]> {
  return em.find(PaymentMethod, { memberId: member.id }, { orderBy: { rank: 'asc' }, ...(lock ? { lockMode: LockMode.PESSIMISTIC_WRITE } : {}) });
}

/** `append`: the method writer, shared with the enrolments when the app passes it (one batcher for both). */
export function paymentMethodsGrpc(orm: MikroORM, providers: PaymentProviders, append = methodAppender(orm)): ServiceImpl<'billing.v1.PaymentMethods'> {
  const addFromToken = methodFromTokenAdder(orm, providers, append);
  return {
    AddPaymentMethod: async (req) => append({ scope: requireScope(req.scope), memberId: req.memberId, details: instrumentDetailsOf(req), providerToken: null }),

    /** Validates the token with the merchant's payment provider, then stores what it stands for. */
    AddPaymentMethodFromToken: async (req) => addFromToken({ scope: requireScope(req.scope), memberId: req.memberId, providerToken: req.providerToken ?? '' }),

    GetPaymentMethod: async (req) => {
      const pm = await orm.em.fork().findOne(PaymentMethod, scopedTo(requireScope(req.scope), { id: req.id }));
      if (!pm || pm.memberId !== req.memberId.toLowerCase()) throw new DomainError('not_found', 'Payment method not found.');
      return pm.toMessage();
    },

    ListPaymentMethods: async (req) => {
      const scope = requireScope(req.scope);
      const em = orm.em.fork();
      const member = await findMember(em, scope, req.memberId);
      return { items: (await methodsOf(em, member)).map((m) => m.toMessage()) };
    },

    ReorderPaymentMethods: async (req) => {
      const scope = requireScope(req.scope);
      return orm.em.fork().transactional(async (em) => {
        const member = await findMember(em, scope, req.memberId, { lock: true });
        const methods = await methodsOf(em, member, true);
        const ordered = rerank(methods, req.orderedIds ?? []);
        await em.flush();
        return { items: byRank(ordered).map((m) => m.toMessage()) };
      });
    },
  };
}
