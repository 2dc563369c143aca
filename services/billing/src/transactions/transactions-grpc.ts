import type { MikroORM } from '@mikro-orm/postgresql';
import { DomainError, isUuidText, pageWindow } from '@billing/contracts';
import { requireScope, type ServiceImpl } from '@billing/service-runtime';
import type { PaymentProviders } from '../payment-provider/payment-providers.js';
import { findTransaction, TransactionCommands } from './transaction-commands.js';
import { Transaction } from './transaction.js';

const STATUSES = ['Processing', 'Settled', 'Failed'];

/** The order of `ListTransactions`, which the index `transactions_merchant_order_index` (and `_status_index`) holds. */
export const TRANSACTION_LIST_ORDER = { occurredAt: 'asc', createdAt: 'asc', id: 'asc' } as const;

/** `concurrency`: provider calls in flight per batch of refunds and retries. */
export function transactionsGrpc(orm: MikroORM, providers: PaymentProviders, leaseMs: number, concurrency: number): ServiceImpl<'billing.v1.Transactions'> {
  const commands = new TransactionCommands({ orm, providers, leaseMs, concurrency });
  return {
    GetTransaction: async (req) => (await findTransaction(orm.em.fork(), requireScope(req.scope), req.id)).toMessage(),

    ListTransactions: async (req) => {
      const scope = requireScope(req.scope);
      const merchantId = scope.kind === 'merchant' ? scope.merchantId : req.merchantId?.toLowerCase();
      if (!merchantId) throw DomainError.field('merchantId', 'merchantId is required.');
      const where: Record<string, unknown> = { merchantId };
      if (req.subscriptionId) {
        if (!isUuidText(req.subscriptionId)) throw DomainError.field('subscriptionId', 'Must be a valid UUID.');
        where.subscriptionId = req.subscriptionId.toLowerCase();
      }
      if (req.status) {
        if (!STATUSES.includes(req.status)) throw DomainError.field('status', `Must be one of ${STATUSES.join(', ')}.`);
        where.status = req.status;
      }
      const [items, total] = await orm.em.fork().findAndCount(Transaction, where, { orderBy: TRANSACTION_LIST_ORDER, ...pageWindow(req) });
      return { items: items.map((t) => t.toMessage()), totalCount: total };
    },

    RetryTransaction: async (req) => (await commands.retry(requireScope(req.scope), req.id)).toMessage(),

    RefundTransaction: async (req) => {
      const amount = req.amountMinor == null ? null : Number(req.amountMinor);
      return (await commands.refund(requireScope(req.scope), req.id, amount, req.reason ?? null)).toMessage();
    },
  };
}
