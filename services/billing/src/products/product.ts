import { randomUUID } from 'node:crypto';
import { EntitySchema } from '@mikro-orm/postgresql';

/** Something a merchant sells by subscription; plans price it and questions onboard it. */
export class Product {
  id: string = randomUUID();
  merchantId!: string;
  name!: string;
  description: string | null = null;
  createdAt: Date = new Date();
  updatedAt: Date = new Date();

  static create(input: { merchantId: string; name: string; description?: string | null }): Product {
    return Object.assign(new Product(), { merchantId: input.merchantId, name: input.name, description: input.description ?? null });
  }

  toMessage() {
    return {
      id: this.id,
      merchantId: this.merchantId,
      name: this.name,
      description: this.description ?? undefined,
      createdAt: this.createdAt.toISOString(),
      updatedAt: this.updatedAt.toISOString(),
    };
  }
}

export const ProductSchema = new EntitySchema<Product>({
  class: Product,
  tableName: 'products',
  properties: {
    id: { type: 'uuid', primary: true },
    merchantId: { type: 'uuid' },
    name: { type: 'string' },
    description: { type: 'text', nullable: true },
    createdAt: { type: 'Date', columnType: 'timestamptz' },
    updatedAt: { type: 'Date', columnType: 'timestamptz' },
  },
});
