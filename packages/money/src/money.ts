import { minorUnitDigits, MoneyError } from './currency.js';

/**
 * Largest absolute amount in minor units. Keeps every amount a safe integer, and small enough
 * (under 2^50) that its decimal form survives a round trip through an IEEE double exactly.
 */
export const MAX_MINOR_UNITS = 999_999_999_999_99;

/** An amount of money: an integer count of the currency's minor unit (cents for AUD). */
export interface Money {
  readonly amountMinor: number;
  readonly currency: string;
}

export function money(amountMinor: number, currency: string): Money {
  minorUnitDigits(currency);
  assertMinorUnits(amountMinor);
  return Object.freeze({ amountMinor, currency });
}

function assertMinorUnits(amountMinor: number): void {
  if (!Number.isSafeInteger(amountMinor)) throw new MoneyError('not_a_decimal', 'Amount in minor units must be a whole number.');
  if (Math.abs(amountMinor) > MAX_MINOR_UNITS) throw new MoneyError('out_of_range', 'Amount is too large.');
}

const DECIMAL = /^(-)?(\d+)(?:\.(\d+))?$/;

/**
 * Converts a decimal amount in major units, as it arrives at the REST edge (`19.95` or
 * `"19.95"`), to integer minor units, exactly: no binary floating point arithmetic is involved.
 * A JSON number is read through its shortest round-trip decimal form, which is the text the
 * client wrote. More fraction digits than the currency has are refused, never rounded.
 */
export function toMinorUnits(value: number | string, currency: string): number {
  const digits = minorUnitDigits(currency);
  let text: string;
  if (typeof value === 'number') {
    if (!Number.isFinite(value)) throw new MoneyError('not_a_decimal', 'Amount must be a finite decimal number.');
    text = String(value);
    if (/e/i.test(text)) {
      // Exponent notation: tiny fractions (1e-7) have too many digits, huge numbers are out of range.
      if (Math.abs(value) < 1) throw new MoneyError('too_many_decimals', tooManyDecimals(currency, digits));
      throw new MoneyError('out_of_range', 'Amount is too large.');
    }
  } else {
    text = value;
  }
  const m = DECIMAL.exec(text);
  if (!m) throw new MoneyError('not_a_decimal', 'Amount must be a decimal number such as 19.95.');
  const [, sign, whole, fraction = ''] = m;
  if (fraction.length > digits) throw new MoneyError('too_many_decimals', tooManyDecimals(currency, digits));
  const minor = BigInt(whole! + fraction.padEnd(digits, '0')) * (sign ? -1n : 1n);
  if (minor > BigInt(MAX_MINOR_UNITS) || minor < -BigInt(MAX_MINOR_UNITS)) throw new MoneyError('out_of_range', 'Amount is too large.');
  return Number(minor) || 0;
}

function tooManyDecimals(currency: string, digits: number): string {
  return digits === 0 ? `${currency} amounts have no decimal places.` : `${currency} amounts have at most ${digits} decimal place${digits === 1 ? '' : 's'}.`;
}

/** The exact decimal text of an amount in minor units: 1995 AUD → "19.95", -5 → "-0.05", 700 JPY → "700". */
export function formatDecimal(amountMinor: number, currency: string): string {
  const digits = minorUnitDigits(currency);
  assertMinorUnits(amountMinor);
  const abs = String(Math.abs(amountMinor)).padStart(digits + 1, '0');
  const sign = amountMinor < 0 ? '-' : '';
  if (digits === 0) return sign + abs;
  return `${sign}${abs.slice(0, -digits)}.${abs.slice(-digits)}`;
}

/**
 * The amount as a JSON number in major units (1995 AUD → 19.95). The double nearest to the
 * exact decimal; its shortest form, which JSON.stringify writes, is exactly `formatDecimal`.
 */
export function toMajorUnits(amountMinor: number, currency: string): number {
  return Number(formatDecimal(amountMinor, currency));
}

/** Sum of two amounts of the same currency. */
export function add(a: Money, b: Money): Money {
  assertSameCurrency(a, b);
  return money(a.amountMinor + b.amountMinor, a.currency);
}

export function subtract(a: Money, b: Money): Money {
  assertSameCurrency(a, b);
  return money(a.amountMinor - b.amountMinor, a.currency);
}

function assertSameCurrency(a: Money, b: Money): void {
  if (a.currency !== b.currency) throw new MoneyError('currency_mismatch', `Cannot combine ${a.currency} with ${b.currency}.`);
}
