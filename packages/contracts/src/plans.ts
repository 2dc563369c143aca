import { z } from 'zod';
import { DEFAULT_CURRENCY, isSupportedCurrency, MoneyError, SUPPORTED_CURRENCIES, toMinorUnits } from '@billing/money';
import { DateTime, NonBlankText, PageQuery, Uuid } from './common.js';

export const PLAN_INTERVALS = ['Week', 'Fortnight', 'Month', 'Year'] as const;
export type PlanInterval = (typeof PLAN_INTERVALS)[number];

export const MAX_INTERVAL_COUNT = 52;
export const MAX_TRIAL_DAYS = 365;

/** ISO 4217 code of a supported currency; lower case is accepted and upper-cased. */
export const Currency = z
  .string()
  .trim()
  .toUpperCase()
  .refine(isSupportedCurrency, `Must be a supported ISO 4217 currency code (${SUPPORTED_CURRENCIES.join(', ')}).`);

/**
 * A decimal amount in major units as sent over REST: a JSON number (`19.95`) or a decimal
 * string (`"19.95"`). It is converted once, exactly, to integer minor units of its currency.
 */
export const DecimalAmount = z.union([z.number(), z.string()]).meta({ description: 'Decimal amount in major units, greater than zero, e.g. 19.95 or "19.95"; at most as many decimals as the currency has (2 for AUD).' });

/** Adds an issue at `path` unless `amount` is a positive amount exactly representable in `currency`. */
export function checkPositiveAmount(amount: number | string, currency: string, ctx: z.RefinementCtx, path: PropertyKey[] = ['amount']): void {
  if (!isSupportedCurrency(currency)) return; // reported on the currency field
  try {
    if (toMinorUnits(amount, currency) <= 0) ctx.addIssue({ code: 'custom', path, message: 'Must be greater than zero.' });
  } catch (e) {
    if (!(e instanceof MoneyError)) throw e;
    ctx.addIssue({ code: 'custom', path, message: e.message });
  }
}

/** A price for a product: `amount` per `intervalCount` × `interval`, charged in advance. */
export const Plan = z
  .object({
    id: Uuid,
    merchantId: Uuid,
    productId: Uuid,
    name: z.string(),
    amount: z.number().meta({ description: 'Decimal amount in major units (19.95).' }),
    currency: z.string(),
    interval: z.enum(PLAN_INTERVALS),
    intervalCount: z.number().int(),
    trialDays: z.number().int(),
    isActive: z.boolean(),
    createdAt: DateTime,
    updatedAt: DateTime,
  })
  .meta({ id: 'Plan' });
export type Plan = z.infer<typeof Plan>;

export const CreatePlanRequest = z
  .object({
    merchantId: Uuid,
    productId: Uuid,
    name: NonBlankText(200),
    amount: DecimalAmount,
    // Optional fields: absent or null takes the default, as null does on every other create.
    currency: Currency.nullish().meta({ description: 'ISO 4217 code; AUD when absent or null.', default: DEFAULT_CURRENCY }).transform((v) => v ?? DEFAULT_CURRENCY),
    interval: z.enum(PLAN_INTERVALS),
    intervalCount: z.number().int('Must be a whole number.').min(1).max(MAX_INTERVAL_COUNT).nullish().meta({ description: '1 when absent or null.', default: 1 }).transform((v) => v ?? 1),
    trialDays: z.number().int('Must be a whole number.').min(0).max(MAX_TRIAL_DAYS).nullish().meta({ description: '0 when absent or null.', default: 0 }).transform((v) => v ?? 0),
    isActive: z.boolean().nullish().meta({ description: 'true when absent or null.', default: true }).transform((v) => v ?? true),
  })
  .superRefine((p, ctx) => checkPositiveAmount(p.amount, p.currency, ctx))
  .meta({ id: 'CreatePlanRequest' });
export type CreatePlanRequest = z.infer<typeof CreatePlanRequest>;

/** Only the name and the active flag change; price and schedule are fixed once subscribed to. */
/**
 * A plan's price and schedule are fixed once subscriptions may be billed on them: an update that
 * names one is refused (400 naming the field) rather than answered 200 with nothing changed.
 */
const FIXED_TERM = "A plan's product, price and schedule cannot be changed: create a new plan (and deactivate this one).";
const FixedTerm = z
  .unknown()
  .refine((v) => v === undefined || v === null, FIXED_TERM)
  .optional()
  .meta({ description: 'Cannot be changed (400 when given).' });

export const UpdatePlanRequest = z
  .object({
    id: Uuid.nullish(),
    merchantId: Uuid.nullish(),
    name: NonBlankText(200).nullish(),
    isActive: z.boolean().nullish(),
    productId: FixedTerm,
    amount: FixedTerm,
    currency: FixedTerm,
    interval: FixedTerm,
    intervalCount: FixedTerm,
    trialDays: FixedTerm,
  })
  .meta({ id: 'UpdatePlanRequest' });
export type UpdatePlanRequest = z.infer<typeof UpdatePlanRequest>;

/** `true`/`false` in a query string. */
export const QueryBoolean = z.enum(['true', 'false']).transform((v) => v === 'true');

export const ListPlansQuery = PageQuery.extend({ merchantId: Uuid.optional(), productId: Uuid.optional(), isActive: QueryBoolean.optional() });
