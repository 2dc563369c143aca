import { Batcher, GroupWrite, requireMerchantScope, requireScope, type CallScope, type ServiceImpl } from '@billing/service-runtime';
import { type EntityManager, type MikroORM } from '@mikro-orm/postgresql';
import { DomainError, isUuidText, pageWindow } from '@billing/contracts';
import { findManyById, findScoped, pickScoped } from '../merchant-scope.js';
import { Product } from '../products/product.js';
import { Plan } from './plan.js';

/** A plan addressed by id: another merchant's plan is indistinguishable from a missing one. */
export function findPlan(em: EntityManager, scope: CallScope, id: string, opts: { lock?: boolean } = {}): Promise<Plan> {
  return findScoped(em, Plan, scope, id, 'Plan', opts);
}

type NewPlan = Omit<Parameters<typeof Plan.create>[0], 'merchantId' | 'productId'> & { scope: CallScope; productId: string };
type PlanChange = { scope: CallScope; id: string; name?: string | null; isActive?: boolean | null };

export function plansGrpc(orm: MikroORM): ServiceImpl<'billing.v1.Plans'> {
  /** Group-committed: the creates that arrive together share one read of their products and one insert. */
  const creates = new GroupWrite(orm, {
    load: (em: EntityManager, items: readonly NewPlan[]) => findManyById(em, Product, items.map((p) => p.productId)),
    apply: (em: EntityManager, { scope, productId, ...input }: NewPlan, products: Map<string, Product>) => {
      const product = pickScoped(products, scope, productId, 'Product');
      const plan = Plan.create({ ...input, merchantId: product.merchantId, productId: product.id });
      em.persist(plan);
      return plan.toMessage();
    },
  });
  /** Group-committed under the plans' row locks; one plan's updates never share a batch. */
  const updates = new GroupWrite(
    orm,
    {
      load: (em: EntityManager, items: readonly PlanChange[]) => findManyById(em, Plan, items.map((c) => c.id), { lock: true }),
      apply: (_em: EntityManager, change: PlanChange, plans: Map<string, Plan>) => {
        const plan = pickScoped(plans, change.scope, change.id, 'Plan');
        plan.update({ name: change.name, isActive: change.isActive });
        return plan.toMessage();
      },
    },
    { keyOf: (c) => c.id.toLowerCase() },
  );
  /** Reads that arrive together share one `select ... where id in (...)`; each still reads the current row. */
  const reads = new Batcher<string, Plan | undefined>(async (ids) => {
    const found = await findManyById(orm.em.fork(), Plan, ids);
    return ids.map((id) => found.get(id));
  });

  return {
    CreatePlan: async (req) => {
      const merchantId = requireMerchantScope(req.scope);
      return creates.run({ ...req, scope: { kind: 'merchant', merchantId }, amountMinor: Number(req.amountMinor) });
    },

    GetPlan: async (req) => {
      // As findPlan answers: a malformed id is `Not found.`, another merchant's plan is missing.
      const scope = requireScope(req.scope);
      if (!isUuidText(req.id)) throw new DomainError('not_found', 'Not found.');
      const plan = await reads.submit(req.id.toLowerCase());
      if (!plan || (scope.kind === 'merchant' && plan.merchantId !== scope.merchantId)) throw new DomainError('not_found', 'Plan not found.');
      return plan.toMessage();
    },

    ListPlans: async (req) => {
      const where: Record<string, unknown> = { merchantId: requireMerchantScope(req.scope) };
      if (req.productId) where.productId = req.productId.toLowerCase();
      if (req.isActive !== undefined) where.isActive = req.isActive;
      const [items, total] = await orm.em.fork().findAndCount(Plan, where, { orderBy: { createdAt: 'asc', id: 'asc' }, ...pageWindow(req) });
      return { items: items.map((p) => p.toMessage()), totalCount: total };
    },

    UpdatePlan: async (req) => updates.run({ scope: requireScope(req.scope), id: req.id, name: req.name, isActive: req.isActive }),
  };
}
