import { randomUUID } from 'node:crypto';
import { EntitySchema } from '@mikro-orm/postgresql';
import type { PaymentMethodType } from '@billing/contracts';

/** What tokenisation tells us about an instrument; never a full card or account number. */
export interface InstrumentDetails {
  type: PaymentMethodType;
  brand: string | null;
  last4: string;
  expiryMonth: number | null;
  expiryYear: number | null;
  accountName: string | null;
  bsb: string | null;
}

/**
 * A member's stored instrument. `rank` orders the member's methods (1 = default); it is unique
 * per member (a deferred constraint, so a reorder may swap ranks within one transaction).
 */
export class PaymentMethod implements InstrumentDetails {
  id: string = randomUUID();
  merchantId!: string;
  memberId!: string;
  type!: PaymentMethodType;
  brand: string | null = null;
  last4!: string;
  expiryMonth: number | null = null;
  expiryYear: number | null = null;
  accountName: string | null = null;
  bsb: string | null = null;
  /** The payment provider's token for this instrument, when it was added from one. */
  providerToken: string | null = null;
  rank!: number;
  createdAt: Date = new Date();
  updatedAt: Date = new Date();

  static create(input: { merchantId: string; memberId: string; rank: number; providerToken?: string | null } & InstrumentDetails): PaymentMethod {
    return Object.assign(new PaymentMethod(), { ...input, providerToken: input.providerToken ?? null });
  }

  toMessage() {
    return {
      id: this.id,
      merchantId: this.merchantId,
      memberId: this.memberId,
      type: this.type,
      brand: this.brand ?? undefined,
      last4: this.last4,
      expiryMonth: this.expiryMonth ?? undefined,
      expiryYear: this.expiryYear ?? undefined,
      accountName: this.accountName ?? undefined,
      bsb: this.bsb ?? undefined,
      rank: this.rank,
      isDefault: this.rank === 1,
      createdAt: this.createdAt.toISOString(),
      hasProviderToken: this.providerToken !== null,
    };
  }

  /** The method as the REST API shows it (the `payment_method.added` payload). */
  toView() {
    const { hasProviderToken: _t, ...view } = this.toMessage();
    return { ...view, brand: this.brand, expiryMonth: this.expiryMonth, expiryYear: this.expiryYear, accountName: this.accountName, bsb: this.bsb };
  }
}

export const PaymentMethodSchema = new EntitySchema<PaymentMethod>({
  class: PaymentMethod,
  tableName: 'payment_methods',
  properties: {
    id: { type: 'uuid', primary: true },
    merchantId: { type: 'uuid' },
    memberId: { type: 'uuid' },
    type: { type: 'string' },
    brand: { type: 'string', nullable: true },
    last4: { type: 'string', columnType: 'char(4)' },
    expiryMonth: { type: 'smallint', nullable: true },
    expiryYear: { type: 'smallint', nullable: true },
    accountName: { type: 'string', nullable: true },
    bsb: { type: 'string', nullable: true },
    providerToken: { type: 'string', nullable: true },
    rank: { type: 'integer' },
    createdAt: { type: 'Date', columnType: 'timestamptz' },
    updatedAt: { type: 'Date', columnType: 'timestamptz' },
  },
});
