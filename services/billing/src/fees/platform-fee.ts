import { percentageOf } from '@billing/money';

/** A merchant's platform fee terms: `percent` of each settled charge plus `fixedMinor`. */
export interface FeeTerms {
  /** Exact decimal text, e.g. "1.5" for 1.5 %. */
  percent: string;
  /** Minor units of the charge's currency, e.g. 30 for 0.30 AUD. */
  fixedMinor: number;
}

export const DEFAULT_FEE_TERMS: FeeTerms = { percent: '1.5', fixedMinor: 30 };

/**
 * The platform fee on a charge of `amountMinor`: the percentage part rounded half-even to whole
 * minor units (as `@billing/money` rounds everything), plus the fixed part, never more than the
 * charge itself. E.g. 1.5 % + 0.30 on 19.95 → 0.30 (29.925 → 30 cents) + 0.30 = 0.60.
 */
export function platformFee(amountMinor: number, terms: FeeTerms): number {
  return Math.min(amountMinor, percentageOf(amountMinor, terms.percent) + terms.fixedMinor);
}

/** The numeric(7,4) column's text ("1.5000") as the shortest decimal ("1.5"). */
export function normalisePercent(text: string | number): string {
  const s = String(text);
  return s.includes('.') ? s.replace(/0+$/, '').replace(/\.$/, '') : s;
}
