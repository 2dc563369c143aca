import { randomUUID } from 'node:crypto';
import { EntitySchema } from '@mikro-orm/postgresql';

/**
 * A merchant's customer. Unique per merchant by email compared case-insensitively (a unique
 * index on `(merchant_id, lower(email))`); the email is kept as first given.
 */
export class Member {
  id: string = randomUUID();
  merchantId!: string;
  email!: string;
  firstName!: string;
  lastName!: string;
  phone: string | null = null;
  createdAt: Date = new Date();
  updatedAt: Date = new Date();

  static create(input: { merchantId: string; email: string; firstName: string; lastName: string; phone?: string | null }): Member {
    return Object.assign(new Member(), {
      merchantId: input.merchantId,
      // Stored exactly as sent (contract §2); lookups compare lower(email).
      email: input.email,
      firstName: input.firstName,
      lastName: input.lastName,
      phone: input.phone ?? null,
    });
  }

  toMessage() {
    return {
      id: this.id,
      merchantId: this.merchantId,
      email: this.email,
      firstName: this.firstName,
      lastName: this.lastName,
      phone: this.phone ?? undefined,
      createdAt: this.createdAt.toISOString(),
      updatedAt: this.updatedAt.toISOString(),
    };
  }
}

export const MemberSchema = new EntitySchema<Member>({
  class: Member,
  tableName: 'members',
  properties: {
    id: { type: 'uuid', primary: true },
    merchantId: { type: 'uuid' },
    email: { type: 'string' },
    firstName: { type: 'string' },
    lastName: { type: 'string' },
    phone: { type: 'string', nullable: true },
    createdAt: { type: 'Date', columnType: 'timestamptz' },
    updatedAt: { type: 'Date', columnType: 'timestamptz' },
  },
});
