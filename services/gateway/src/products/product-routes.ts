import { z } from 'zod';
import { CreateProductRequest, ListProductsQuery, Paged, PathId, Product, toPage, Uuid } from '@billing/contracts';
import type { MerchantAccess } from '../auth/access.js';
import { callScope, merchantCallScope } from '../auth/call-scope.js';
import type { Backends } from '../backends/clients.js';
import { created, defineRoute, ok, type RouteSpec } from '../http/route.js';
import { orNull } from '../http/views.js';
import type { Product__Output } from '@billing/proto-types/billing/v1/Product';

export function toProduct(p: Product__Output): Product {
  return { id: p.id, merchantId: p.merchantId, name: p.name, description: orNull(p.description), createdAt: p.createdAt, updatedAt: p.updatedAt };
}

const IdParams = z.object({ id: PathId });

export function productRoutes(backends: Backends, access: MerchantAccess): RouteSpec[] {
  const products = backends.billing.products;
  return [
    defineRoute({
      method: 'POST',
      url: '/api/Products',
      tag: 'Products',
      summary: 'Create a product',
      auth: { merchant: 'Admin' },
      body: CreateProductRequest,
      responses: { 201: Product, 400: null, 403: null, 404: null },
      handler: async ({ body, principal }) => {
        const scope = await merchantCallScope(access, principal, body.merchantId);
        const product = toProduct(await products.CreateProduct({ scope, name: body.name, description: body.description ?? undefined }));
        return created(product, `/api/Products/${product.id}`);
      },
    }),
    defineRoute({
      method: 'GET',
      url: '/api/Products',
      tag: 'Products',
      summary: "List a merchant's products",
      description: 'Oldest first. merchantId defaults to the credential\'s merchant (required with the platform admin token).',
      auth: { merchant: 'Viewer' },
      query: ListProductsQuery,
      responses: { 200: Paged(Product), 403: null, 404: null },
      handler: async ({ query, principal }) => {
        const scope = await merchantCallScope(access, principal, query.merchantId);
        const res = await products.ListProducts({ scope, page: query.page, pageSize: query.pageSize });
        return ok(toPage(res.items.map(toProduct), res.totalCount, query));
      },
    }),
    defineRoute({
      method: 'GET',
      url: '/api/Products/:id',
      tag: 'Products',
      summary: 'Read a product',
      auth: { merchant: 'Viewer' },
      params: IdParams,
      responses: { 200: Product, 404: null },
      handler: async ({ params, principal }) => ok(toProduct(await products.GetProduct({ scope: await callScope(access, principal), id: params.id }))),
    }),
  ];
}
