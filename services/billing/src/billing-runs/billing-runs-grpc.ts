import { DomainError } from '@billing/contracts';
import { requireScope, type ServiceImpl } from '@billing/service-runtime';
import { parseInstant } from '../transactions/instant.js';
import type { BillingRunner } from './billing-runner.js';

export function billingRunsGrpc(runner: BillingRunner): ServiceImpl<'billing.v1.BillingRuns'> {
  return {
    RunBilling: async (req) => {
      if (requireScope(req.scope).kind !== 'platform') throw new DomainError('forbidden', 'Only the platform runs billing.');
      const asOf = parseInstant('asOf', req.asOf) ?? new Date();
      const r = await runner.run(asOf);
      return { ...r, asOf: r.asOf.toISOString() };
    },
  };
}
