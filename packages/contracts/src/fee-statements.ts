import { z } from 'zod';
import { DateTime, Paged, PageQuery, Uuid } from './common.js';
import { Currency } from './plans.js';
import { DateOrDateTime } from './subscriptions.js';

export const FEE_STATEMENT_STATUSES = ['Draft', 'Finalised', 'Paid'] as const;

export const FeeStatement = z
  .object({
    id: Uuid,
    merchantId: Uuid,
    reference: z.string(),
    periodStart: DateTime,
    periodEnd: DateTime,
    status: z.enum(FEE_STATEMENT_STATUSES),
    totalFees: z.number(),
    totalNet: z.number(),
    transactionCount: z.number().int(),
    currency: z.string(),
    finalisedAt: DateTime.nullable(),
    paidAt: DateTime.nullable(),
    createdAt: DateTime,
    paymentReference: z.string().meta({ description: "As given to pay; '' until then, or when pay did not give it." }),
    notes: z.string().meta({ description: "As given to pay; '' until then, or when pay did not give it." }),
  })
  .meta({ id: 'FeeStatement' });
export type FeeStatement = z.infer<typeof FeeStatement>;

export const StatementLine = z
  .object({
    transactionId: Uuid,
    occurredAt: DateTime,
    description: z.string(),
    reference: z.string(),
    status: z.string(),
    amount: z.number(),
    feeAmount: z.number(),
    netAmount: z.number(),
  })
  .meta({ id: 'StatementLine' });
export type StatementLine = z.infer<typeof StatementLine>;

export const PagedStatementLines = Paged(StatementLine).meta({ id: 'PagedStatementLines' });

export const FeeStatementWithLines = z.object({ statement: FeeStatement, lines: PagedStatementLines }).meta({ id: 'FeeStatementWithLines' });

export const GenerateFeeStatementRequest = z
  .object({
    merchantId: Uuid,
    periodStart: DateOrDateTime,
    periodEnd: DateOrDateTime,
    currency: Currency.nullish(),
  })
  .meta({ id: 'GenerateFeeStatementRequest' });

/** The path identifies the statement: a different `statementId` here is ignored (contract §7). */
export const PayFeeStatementRequest = z
  .object({
    // A uuid as interface.md types it, but not validated: whatever it holds, the path names the statement.
    statementId: z.string().nullish().meta({ format: 'uuid', description: 'Ignored: the path names the statement (a different id here changes nothing).' }),
    paymentReference: z.string().max(200).nullish(),
    notes: z.string().max(2000).nullish(),
  })
  .meta({ id: 'PayFeeStatementRequest' });

export const ListFeeStatementsQuery = PageQuery.extend({
  merchantId: Uuid.optional(),
  status: z.enum(FEE_STATEMENT_STATUSES).optional(),
});
