import { z } from 'zod';
import { DateTime, NonBlankText, PageQuery, Uuid } from './common.js';

/** Something a merchant sells by subscription; plans price it and questions onboard it. */
export const Product = z
  .object({
    id: Uuid,
    merchantId: Uuid,
    name: z.string(),
    description: z.string().nullable(),
    createdAt: DateTime,
    updatedAt: DateTime,
  })
  .meta({ id: 'Product' });
export type Product = z.infer<typeof Product>;

export const CreateProductRequest = z
  .object({
    merchantId: Uuid,
    name: NonBlankText(200),
    description: z.string().max(2000).nullish(),
  })
  .meta({ id: 'CreateProductRequest' });
export type CreateProductRequest = z.infer<typeof CreateProductRequest>;

export const ListProductsQuery = PageQuery.extend({ merchantId: Uuid.optional() });
