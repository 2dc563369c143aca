import { z } from 'zod';
import { DateTime, PageQuery, Uuid } from './common.js';
import { DateOrDateTime } from './subscriptions.js';

export const TRANSACTION_KINDS = ['Charge', 'Refund'] as const;
export const TRANSACTION_STATUSES = ['Processing', 'Settled', 'Failed'] as const;

/** A charge or refund; `amount` is a positive decimal in major units on both kinds. */
export const Transaction = z
  .object({
    id: Uuid,
    merchantId: Uuid,
    memberId: Uuid,
    subscriptionId: Uuid.nullable(),
    paymentMethodId: Uuid.nullable(),
    kind: z.enum(TRANSACTION_KINDS),
    amount: z.number(),
    currency: z.string(),
    status: z.enum(TRANSACTION_STATUSES),
    failureReason: z.string().nullable(),
    attempt: z.number().int(),
    originalTransactionId: Uuid.nullable(),
    occurredAt: DateTime,
    settledAt: DateTime.nullable(),
  })
  .meta({ id: 'Transaction' });
export type Transaction = z.infer<typeof Transaction>;

export const ListTransactionsQuery = PageQuery.extend({
  merchantId: Uuid.optional(),
  subscriptionId: Uuid.optional(),
  status: z.enum(TRANSACTION_STATUSES).optional(),
});

export const RetryTransactionRequest = z.object({ id: Uuid.nullish(), merchantId: Uuid.nullish() }).meta({ id: 'RetryTransactionRequest' });

/** `amount` in major units; absent: the whole remaining refundable amount. */
export const RefundTransactionRequest = z
  .object({
    id: Uuid.nullish(),
    merchantId: Uuid.nullish(),
    amount: z
      .union([z.number(), z.string()])
      .nullish()
      .meta({ description: 'Decimal amount in major units, greater than zero and at most what is left to refund of the charge (else 409), e.g. 5 or "5.00"; absent or null: all that is left.' }),
    reason: z.string().max(500).nullish(),
  })
  .meta({ id: 'RefundTransactionRequest' });
export type RefundTransactionRequest = z.infer<typeof RefundTransactionRequest>;

export const BillingRunRequest = z.object({ asOf: DateOrDateTime.nullish() }).meta({ id: 'BillingRunRequest' });

export const BillingRunResult = z
  .object({
    asOf: DateTime,
    charged: z.number().int(),
    succeeded: z.number().int(),
    failed: z.number().int(),
    retried: z.number().int(),
    terminated: z.number().int(),
    skipped: z.number().int(),
  })
  .meta({ id: 'BillingRunResult' });
export type BillingRunResult = z.infer<typeof BillingRunResult>;
