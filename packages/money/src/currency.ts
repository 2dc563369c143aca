/**
 * ISO 4217 currencies the platform accepts, with the number of digits of their minor unit
 * (AUD 2: cents; JPY 0; KWD 3). Amounts are stored and computed as integers of that unit.
 */
export const CURRENCY_EXPONENTS: Readonly<Record<string, number>> = Object.freeze({
  AUD: 2,
  NZD: 2,
  USD: 2,
  CAD: 2,
  EUR: 2,
  GBP: 2,
  CHF: 2,
  SGD: 2,
  HKD: 2,
  SEK: 2,
  NOK: 2,
  DKK: 2,
  ZAR: 2,
  INR: 2,
  MYR: 2,
  PHP: 2,
  THB: 2,
  IDR: 2,
  CNY: 2,
  MXN: 2,
  BRL: 2,
  FJD: 2,
  PGK: 2,
  JPY: 0,
  KRW: 0,
  VND: 0,
  XPF: 0,
  KWD: 3,
  BHD: 3,
  OMR: 3,
  JOD: 3,
});

/** Currency of an amount when none is given. */
export const DEFAULT_CURRENCY = 'AUD';

export const SUPPORTED_CURRENCIES: readonly string[] = Object.freeze(Object.keys(CURRENCY_EXPONENTS));

export function isSupportedCurrency(currency: string): boolean {
  return Object.hasOwn(CURRENCY_EXPONENTS, currency);
}

/** Digits of the minor unit of `currency`; throws `MoneyError('unsupported_currency')` for others. */
export function minorUnitDigits(currency: string): number {
  const digits = CURRENCY_EXPONENTS[currency];
  if (digits === undefined || !Object.hasOwn(CURRENCY_EXPONENTS, currency)) throw new MoneyError('unsupported_currency', `Currency ${currency} is not supported.`);
  return digits;
}

export type MoneyErrorCode = 'unsupported_currency' | 'not_a_decimal' | 'too_many_decimals' | 'out_of_range' | 'currency_mismatch';

/** A refused amount or currency; `code` says why, the message is fit for a validation error. */
export class MoneyError extends Error {
  constructor(
    readonly code: MoneyErrorCode,
    message: string,
  ) {
    super(message);
    this.name = 'MoneyError';
  }
}
