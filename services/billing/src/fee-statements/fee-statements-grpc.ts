import type { MikroORM } from '@mikro-orm/postgresql';
import { DomainError, pageWindow } from '@billing/contracts';
import { isSupportedCurrency } from '@billing/money';
import { requireScope, type CallScope, type ServiceImpl } from '@billing/service-runtime';
import { parseInstant } from '../transactions/instant.js';
import { FeeStatement } from './fee-statement.js';
import { finaliseStatement, findStatement, generateStatement, payStatement, statementLines } from './fee-statement-commands.js';

const STATUSES = ['Draft', 'Finalised', 'Paid'];

function requirePlatform(scope: CallScope): void {
  if (scope.kind !== 'platform') throw new DomainError('forbidden', 'Only the platform administers fee statements.');
}

export function feeStatementsGrpc(orm: MikroORM): ServiceImpl<'billing.v1.FeeStatements'> {
  return {
    GenerateFeeStatement: async (req) => {
      requirePlatform(requireScope(req.scope));
      const periodStart = parseInstant('periodStart', req.periodStart);
      const periodEnd = parseInstant('periodEnd', req.periodEnd);
      const errors: Record<string, string[]> = {};
      if (!periodStart) errors.periodStart = ['Required.'];
      if (!periodEnd) errors.periodEnd = ['Required.'];
      const currency = req.currency || undefined;
      if (currency !== undefined && !isSupportedCurrency(currency)) errors.currency = ['Must be a supported ISO 4217 currency code.'];
      if (Object.keys(errors).length) throw DomainError.validation(errors);
      return (await generateStatement(orm, { merchantId: req.merchantId, periodStart: periodStart!, periodEnd: periodEnd!, currency })).toMessage();
    },

    FinaliseFeeStatement: async (req) => {
      const scope = requireScope(req.scope);
      requirePlatform(scope);
      return (await finaliseStatement(orm, scope, req.id)).toMessage();
    },

    PayFeeStatement: async (req) => {
      const scope = requireScope(req.scope);
      requirePlatform(scope);
      return (await payStatement(orm, scope, req.id, { paymentReference: req.paymentReference, notes: req.notes })).toMessage();
    },

    GetFeeStatement: async (req) => (await findStatement(orm.em.fork(), requireScope(req.scope), req.id)).toMessage(),

    ListFeeStatements: async (req) => {
      const scope = requireScope(req.scope);
      const where: Record<string, unknown> = {};
      if (scope.kind === 'merchant') where.merchantId = scope.merchantId;
      else if (req.merchantId) where.merchantId = req.merchantId.toLowerCase();
      if (req.status) {
        if (!STATUSES.includes(req.status)) throw DomainError.field('status', `Must be one of ${STATUSES.join(', ')}.`);
        where.status = req.status;
      }
      const [items, total] = await orm.em.fork().findAndCount(FeeStatement, where, { orderBy: { createdAt: 'asc', id: 'asc' }, ...pageWindow(req) });
      return { items: items.map((s) => s.toMessage()), totalCount: total };
    },

    ListFeeStatementLines: async (req) => statementLines(orm, requireScope(req.scope), req.id, req),
  };
}
