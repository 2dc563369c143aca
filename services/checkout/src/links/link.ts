import { randomUUID } from 'node:crypto';
import { EntitySchema } from '@mikro-orm/postgresql';

/** A deep link the platform signed for a merchant (`POST /api/Checkout/links`), kept for audit. */
export class Link {
  id: string = randomUUID();
  merchantId!: string;
  apiKeyId!: string;
  planId!: string;
  nonce!: string;
  returnUrl!: string;
  expiresAt!: Date;
  createdAt: Date = new Date();
}

export const LinkSchema = new EntitySchema<Link>({
  class: Link,
  tableName: 'links',
  properties: {
    id: { type: 'uuid', primary: true },
    merchantId: { type: 'uuid' },
    apiKeyId: { type: 'uuid' },
    planId: { type: 'uuid' },
    nonce: { type: 'string' },
    returnUrl: { type: 'text' },
    expiresAt: { type: 'Date', columnType: 'timestamptz' },
    createdAt: { type: 'Date', columnType: 'timestamptz' },
  },
});
