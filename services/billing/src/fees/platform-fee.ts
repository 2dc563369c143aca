import { minorUnitDigits, multiplyRatio, percentageOf } from '@billing/money';

/** A merchant's platform fee terms: `percent` of each settled charge plus a fixed amount. */
export interface FeeTerms {
  /** Exact decimal text, e.g. "1.5" for 1.5 %. */
  percent: string;
  /**
   * The fixed part in hundredths of a major unit of the charge's currency, e.g. 30 for 0.30
   * (stored in `platform_fee_fixed_minor`, shown as `platformFeeFixed`): 0.30 AUD is 30 cents,
   * 0.30 KWD 300 fils, and 0.30 JPY rounds to 0 yen.
   */
  fixedHundredths: number;
}

export const DEFAULT_FEE_TERMS: FeeTerms = { percent: '1.5', fixedHundredths: 30 };

/**
 * The platform fee on a charge of `amountMinor` in `currency`: the percentage part and the fixed
 * part, each rounded half-even to whole minor units of the currency (as `@billing/money` rounds
 * everything), never more than the charge itself. E.g. 1.5 % + 0.30 on 19.95 AUD → 0.30
 * (29.925 → 30 cents) + 0.30 = 0.60; on 2,000 JPY → 30 + 0 (0.3 yen) = 30 yen.
 */
export function platformFee(amountMinor: number, currency: string, terms: FeeTerms): number {
  const fixedMinor = multiplyRatio(terms.fixedHundredths, 10 ** minorUnitDigits(currency), 100);
  return Math.min(amountMinor, percentageOf(amountMinor, terms.percent) + fixedMinor);
}

/** The numeric(7,4) column's text ("1.5000") as the shortest decimal ("1.5"). */
export function normalisePercent(text: string | number): string {
  const s = String(text);
  return s.includes('.') ? s.replace(/0+$/, '').replace(/\.$/, '') : s;
}
