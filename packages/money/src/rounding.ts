import { minorUnitDigits, MoneyError } from './currency.js';
import { MAX_MINOR_UNITS } from './money.js';

/**
 * `numerator / denominator` rounded to an integer, ties to the even neighbour (banker's
 * rounding): 5/2 → 2, 7/2 → 4, -5/2 → -2. Exact for any size of operands.
 */
export function roundHalfEven(numerator: bigint, denominator: bigint): bigint {
  if (denominator === 0n) throw new RangeError('Division by zero.');
  const negative = numerator < 0n !== denominator < 0n;
  const n = numerator < 0n ? -numerator : numerator;
  const d = denominator < 0n ? -denominator : denominator;
  let q = n / d;
  const twiceRemainder = (n % d) * 2n;
  if (twiceRemainder > d || (twiceRemainder === d && q % 2n === 1n)) q += 1n;
  return negative ? -q : q;
}

/** A non-negative decimal such as "0.015" or "1.5" as an exact fraction. */
export function parseRatio(decimal: string): { numerator: bigint; denominator: bigint } {
  const m = /^(\d+)(?:\.(\d+))?$/.exec(decimal);
  if (!m) throw new MoneyError('not_a_decimal', `"${decimal}" is not a non-negative decimal number.`);
  const fraction = m[2] ?? '';
  return { numerator: BigInt(m[1]! + fraction), denominator: 10n ** BigInt(fraction.length) };
}

/**
 * `amountMinor × numerator / denominator`, rounded half-even to whole minor units; e.g. a 1.5%
 * fee on 1995 cents is `multiplyRatio(1995, 15, 1000)` = 30 (29.925 rounded).
 */
export function multiplyRatio(amountMinor: number, numerator: bigint | number, denominator: bigint | number): number {
  if (!Number.isSafeInteger(amountMinor)) throw new MoneyError('not_a_decimal', 'Amount in minor units must be a whole number.');
  return Number(roundHalfEven(BigInt(amountMinor) * BigInt(numerator), BigInt(denominator)));
}

/** `amountMinor × percent / 100` rounded half-even, with `percent` a decimal string ("1.5"). */
export function percentageOf(amountMinor: number, percent: string): number {
  const { numerator, denominator } = parseRatio(percent);
  return multiplyRatio(amountMinor, numerator, denominator * 100n);
}

/**
 * A decimal in major units with any number of fraction digits (e.g. a computed "19.955"),
 * rounded half-even to whole minor units of `currency`. Unlike `toMinorUnits`, extra digits
 * are rounded rather than refused: for amounts the platform computes, never for client input.
 */
export function roundToMinorUnits(decimal: string, currency: string): number {
  const digits = minorUnitDigits(currency);
  const m = /^(-)?(\d+)(?:\.(\d+))?$/.exec(decimal);
  if (!m) throw new MoneyError('not_a_decimal', `"${decimal}" is not a decimal number.`);
  const fraction = m[3] ?? '';
  const scaled = BigInt(m[2]! + fraction) * (m[1] ? -1n : 1n);
  const shift = fraction.length - digits;
  const minor = shift > 0 ? roundHalfEven(scaled, 10n ** BigInt(shift)) : scaled * 10n ** BigInt(-shift);
  if (minor > BigInt(MAX_MINOR_UNITS) || minor < -BigInt(MAX_MINOR_UNITS)) throw new MoneyError('out_of_range', 'Amount is too large.');
  return Number(minor) || 0;
}
