import type { ServiceImpl } from '@billing/service-runtime';
import { ForeignKeyConstraintViolationException, type EntityManager, type MikroORM } from '@mikro-orm/postgresql';
import { CreateProductRequest, DomainError, pageWindow, parseOrThrow } from '@billing/contracts';
import { findScoped } from '../merchant-scope.js';
import { Product } from './product.js';

/** A product addressed by id: another merchant's product is indistinguishable from a missing one. */
export function findProduct(em: EntityManager, ref: { merchantId: string; id: string }, opts: { lock?: boolean } = {}): Promise<Product> {
  return findScoped(em, Product, ref, 'Product', opts);
}

export function productsGrpc(orm: MikroORM): ServiceImpl<'billing.v1.Products'> {
  return {
    CreateProduct: async (req) => {
      const input = parseOrThrow(CreateProductRequest, req);
      const product = Product.create({ ...input, merchantId: input.merchantId.toLowerCase() });
      try {
        await orm.em.fork().persistAndFlush(product);
      } catch (e) {
        if (e instanceof ForeignKeyConstraintViolationException) throw new DomainError('merchant_not_found', 'Merchant not found.');
        throw e;
      }
      return product.toMessage();
    },

    GetProduct: async (req) => (await findProduct(orm.em.fork(), req)).toMessage(),

    ListProducts: async (req) => {
      const [items, total] = await orm.em.fork().findAndCount(Product, { merchantId: req.merchantId }, { orderBy: { createdAt: 'asc', id: 'asc' }, ...pageWindow(req) });
      return { items: items.map((p) => p.toMessage()), totalCount: total };
    },
  };
}
