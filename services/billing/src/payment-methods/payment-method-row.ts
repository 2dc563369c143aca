import { PaymentMethod } from './payment-method.js';

/** A `payment_methods` row as jsonb (`to_jsonb`, or the document an insert reads): instants in ISO 8601. */
export interface PaymentMethodRow {
  id: string;
  merchant_id: string;
  member_id: string;
  type: PaymentMethod['type'];
  brand: string | null;
  last4: string;
  expiry_month: number | null;
  expiry_year: number | null;
  account_name: string | null;
  bsb: string | null;
  provider_token: string | null;
  rank: number;
  created_at: string;
  updated_at: string;
}

/** The entity of a row read by hand-written SQL, detached from any unit of work. */
export function paymentMethodOfRow(r: PaymentMethodRow): PaymentMethod {
  return Object.assign(new PaymentMethod(), {
    id: r.id,
    merchantId: r.merchant_id,
    memberId: r.member_id,
    type: r.type,
    brand: r.brand,
    last4: r.last4,
    expiryMonth: r.expiry_month,
    expiryYear: r.expiry_year,
    accountName: r.account_name,
    bsb: r.bsb,
    providerToken: r.provider_token,
    rank: r.rank,
    createdAt: new Date(r.created_at),
    updatedAt: new Date(r.updated_at),
  });
}

/** Every column of the entity's row, as hand-written SQL inserts it (what the ORM would write). */
export function rowOfPaymentMethod(pm: PaymentMethod): PaymentMethodRow {
  return {
    id: pm.id,
    merchant_id: pm.merchantId,
    member_id: pm.memberId,
    type: pm.type,
    brand: pm.brand,
    last4: pm.last4,
    expiry_month: pm.expiryMonth,
    expiry_year: pm.expiryYear,
    account_name: pm.accountName,
    bsb: pm.bsb,
    provider_token: pm.providerToken,
    rank: pm.rank,
    created_at: pm.createdAt.toISOString(),
    updated_at: pm.updatedAt.toISOString(),
  };
}
