import { requireMerchantScope, requireScope, type CallScope, type ServiceImpl } from '@billing/service-runtime';
import type { EntityManager, MikroORM } from '@mikro-orm/postgresql';
import { CreateProductRequest, pageWindow, parseOrThrow } from '@billing/contracts';
import { findScoped } from '../merchant-scope.js';
import { Product } from './product.js';
import { productCreation } from './product-store.js';

/** A product addressed by id: another merchant's product is indistinguishable from a missing one. */
export function findProduct(em: EntityManager, scope: CallScope, id: string, opts: { lock?: boolean } = {}): Promise<Product> {
  return findScoped(em, Product, scope, id, 'Product', opts);
}

export function productsGrpc(orm: MikroORM): ServiceImpl<'billing.v1.Products'> {
  const create = productCreation(orm);
  return {
    CreateProduct: async (req) => {
      const merchantId = requireMerchantScope(req.scope);
      const input = parseOrThrow(CreateProductRequest, { ...req, merchantId });
      const product = Product.create({ ...input, merchantId });
      await create(product);
      return product.toMessage();
    },

    GetProduct: async (req) => (await findProduct(orm.em.fork(), requireScope(req.scope), req.id)).toMessage(),

    ListProducts: async (req) => {
      const merchantId = requireMerchantScope(req.scope);
      const [items, total] = await orm.em.fork().findAndCount(Product, { merchantId }, { orderBy: { createdAt: 'asc', id: 'asc' }, ...pageWindow(req) });
      return { items: items.map((p) => p.toMessage()), totalCount: total };
    },
  };
}
