import { randomUUID } from 'node:crypto';
import { BigIntType, EntitySchema } from '@mikro-orm/postgresql';
import { DomainError, MAX_INTERVAL_COUNT, MAX_TRIAL_DAYS, PLAN_INTERVALS, type PlanInterval } from '@billing/contracts';
import { isSupportedCurrency, MAX_MINOR_UNITS } from '@billing/money';
import type { BillingSchedule } from './billing-interval.js';

/** The price and schedule of a product: `amountMinor` of `currency` every `intervalCount` × `interval`. */
export class Plan implements BillingSchedule {
  id: string = randomUUID();
  merchantId!: string;
  productId!: string;
  name!: string;
  /** Integer minor units of `currency` (cents for AUD). */
  amountMinor!: number;
  currency!: string;
  interval!: PlanInterval;
  intervalCount = 1;
  trialDays = 0;
  isActive = true;
  createdAt: Date = new Date();
  updatedAt: Date = new Date();

  static create(input: {
    merchantId: string;
    productId: string;
    name: string;
    amountMinor: number;
    currency: string;
    interval: string;
    intervalCount: number;
    trialDays: number;
    isActive: boolean;
  }): Plan {
    const errors: Record<string, string[]> = {};
    if (!Number.isSafeInteger(input.amountMinor) || input.amountMinor <= 0 || input.amountMinor > MAX_MINOR_UNITS) errors.amount = ['Must be greater than zero.'];
    if (!isSupportedCurrency(input.currency)) errors.currency = ['Must be a supported ISO 4217 currency code.'];
    if (!(PLAN_INTERVALS as readonly string[]).includes(input.interval)) errors.interval = [`Must be one of ${PLAN_INTERVALS.join(', ')}.`];
    if (!Number.isInteger(input.intervalCount) || input.intervalCount < 1 || input.intervalCount > MAX_INTERVAL_COUNT) errors.intervalCount = [`Must be between 1 and ${MAX_INTERVAL_COUNT}.`];
    if (!Number.isInteger(input.trialDays) || input.trialDays < 0 || input.trialDays > MAX_TRIAL_DAYS) errors.trialDays = [`Must be between 0 and ${MAX_TRIAL_DAYS}.`];
    if (!input.name.trim()) errors.name = ['Must not be empty.'];
    if (Object.keys(errors).length) throw DomainError.validation(errors);
    return Object.assign(new Plan(), { ...input, name: input.name, interval: input.interval as PlanInterval });
  }

  /** Absent fields are unchanged. Price and schedule never change: subscriptions rely on them. */
  update(change: { name?: string | null; isActive?: boolean | null }, now = new Date()): void {
    if (change.name != null) {
      if (!change.name.trim()) throw DomainError.field('name', 'Must not be empty.');
      this.name = change.name;
    }
    if (change.isActive != null) this.isActive = change.isActive;
    this.updatedAt = now;
  }

  toMessage() {
    return {
      id: this.id,
      merchantId: this.merchantId,
      productId: this.productId,
      name: this.name,
      amountMinor: String(this.amountMinor), // int64 travels as a decimal string
      currency: this.currency,
      interval: this.interval,
      intervalCount: this.intervalCount,
      trialDays: this.trialDays,
      isActive: this.isActive,
      createdAt: this.createdAt.toISOString(),
      updatedAt: this.updatedAt.toISOString(),
    };
  }
}

export const PlanSchema = new EntitySchema<Plan>({
  class: Plan,
  tableName: 'plans',
  properties: {
    id: { type: 'uuid', primary: true },
    merchantId: { type: 'uuid' },
    productId: { type: 'uuid' },
    name: { type: 'string' },
    amountMinor: { type: new BigIntType('number') },
    currency: { type: 'string', columnType: 'char(3)' },
    interval: { type: 'string', fieldName: 'billing_interval' },
    intervalCount: { type: 'integer' },
    trialDays: { type: 'integer' },
    isActive: { type: 'boolean' },
    createdAt: { type: 'Date', columnType: 'timestamptz' },
    updatedAt: { type: 'Date', columnType: 'timestamptz' },
  },
});
