import { describe, expect, it } from 'vitest';
import { add, formatDecimal, money, MoneyError, multiplyRatio, percentageOf, roundHalfEven, roundToMinorUnits, subtract, toMajorUnits, toMinorUnits } from './index.js';

function moneyErrorCode(fn: () => unknown): string | undefined {
  try {
    fn();
  } catch (e) {
    if (e instanceof MoneyError) return e.code;
    throw e;
  }
  return undefined;
}

describe('toMinorUnits', () => {
  it('converts JSON numbers exactly, including values with no exact binary form', () => {
    expect(toMinorUnits(19.95, 'AUD')).toBe(1995);
    expect(toMinorUnits(0.1, 'AUD')).toBe(10);
    expect(toMinorUnits(0.29, 'AUD')).toBe(29); // 0.29 * 100 = 28.999999999999996 in floating point
    expect(toMinorUnits(1.1, 'USD')).toBe(110);
  });

  it('converts decimal strings', () => {
    expect(toMinorUnits('19.95', 'AUD')).toBe(1995);
    expect(toMinorUnits('19.9', 'AUD')).toBe(1990);
    expect(toMinorUnits('19', 'AUD')).toBe(1900);
    expect(toMinorUnits('-0.05', 'AUD')).toBe(-5);
    expect(toMinorUnits(0, 'AUD')).toBe(0);
  });

  it('refuses more fraction digits than the currency has instead of rounding', () => {
    expect(moneyErrorCode(() => toMinorUnits(19.951, 'AUD'))).toBe('too_many_decimals');
    expect(moneyErrorCode(() => toMinorUnits('19.950', 'AUD'))).toBe('too_many_decimals');
    expect(moneyErrorCode(() => toMinorUnits(1e-7, 'AUD'))).toBe('too_many_decimals');
    expect(moneyErrorCode(() => toMinorUnits(1.5, 'JPY'))).toBe('too_many_decimals');
    expect(toMinorUnits(1500, 'JPY')).toBe(1500);
    expect(toMinorUnits('1.234', 'KWD')).toBe(1234);
    expect(moneyErrorCode(() => toMinorUnits('1.2345', 'KWD'))).toBe('too_many_decimals');
  });

  it('refuses text that is not a plain decimal, and unknown currencies', () => {
    for (const bad of ['', ' 1', '1,5', '+1', '1e3', '0x10', 'NaN', '1.']) expect(moneyErrorCode(() => toMinorUnits(bad, 'AUD'))).toBe('not_a_decimal');
    expect(moneyErrorCode(() => toMinorUnits(Number.NaN, 'AUD'))).toBe('not_a_decimal');
    expect(moneyErrorCode(() => toMinorUnits(Infinity, 'AUD'))).toBe('not_a_decimal');
    expect(moneyErrorCode(() => toMinorUnits(1, 'XXX'))).toBe('unsupported_currency');
    expect(moneyErrorCode(() => toMinorUnits(1, 'toString'))).toBe('unsupported_currency');
  });

  it('refuses amounts beyond the supported range', () => {
    expect(moneyErrorCode(() => toMinorUnits(1e21, 'AUD'))).toBe('out_of_range');
    expect(moneyErrorCode(() => toMinorUnits('1000000000000.00', 'AUD'))).toBe('out_of_range');
    expect(toMinorUnits('999999999999.99', 'AUD')).toBe(99_999_999_999_999);
  });
});

describe('formatDecimal and toMajorUnits', () => {
  it('format minor units back to the exact decimal', () => {
    expect(formatDecimal(1995, 'AUD')).toBe('19.95');
    expect(formatDecimal(5, 'AUD')).toBe('0.05');
    expect(formatDecimal(-5, 'AUD')).toBe('-0.05');
    expect(formatDecimal(100, 'AUD')).toBe('1.00');
    expect(formatDecimal(700, 'JPY')).toBe('700');
    expect(formatDecimal(1234, 'KWD')).toBe('1.234');
    expect(toMajorUnits(1995, 'AUD')).toBe(19.95);
    expect(JSON.stringify({ amount: toMajorUnits(29, 'AUD') })).toBe('{"amount":0.29}');
  });

  it('round-trips every amount through JSON exactly', () => {
    for (const minor of [1, 7, 10, 29, 99, 1005, 123456789, 99_999_999_999_999, -4242]) {
      const json = JSON.parse(JSON.stringify(toMajorUnits(minor, 'AUD')));
      expect(toMinorUnits(json, 'AUD')).toBe(minor);
    }
  });
});

describe('roundHalfEven', () => {
  it('rounds ties to the even neighbour and everything else to the nearest', () => {
    expect(roundHalfEven(5n, 2n)).toBe(2n);
    expect(roundHalfEven(7n, 2n)).toBe(4n);
    expect(roundHalfEven(-5n, 2n)).toBe(-2n);
    expect(roundHalfEven(-7n, 2n)).toBe(-4n);
    expect(roundHalfEven(5n, -2n)).toBe(-2n);
    expect(roundHalfEven(26n, 10n)).toBe(3n);
    expect(roundHalfEven(24n, 10n)).toBe(2n);
    expect(roundHalfEven(-26n, 10n)).toBe(-3n);
    expect(roundHalfEven(10n, 5n)).toBe(2n);
    expect(() => roundHalfEven(1n, 0n)).toThrow(RangeError);
  });

  it('applies to fees and computed amounts', () => {
    expect(multiplyRatio(1995, 15, 1000)).toBe(30); // 29.925
    expect(multiplyRatio(1000, 15, 1000)).toBe(15);
    expect(multiplyRatio(150, 1, 4)).toBe(38); // 37.5 → 38 (even)
    expect(multiplyRatio(130, 1, 4)).toBe(32); // 32.5 → 32 (even)
    expect(percentageOf(1995, '1.5')).toBe(30);
    expect(percentageOf(2000, '2.5')).toBe(50);
    expect(percentageOf(10, '25')).toBe(2); // 2.5 → 2
    expect(roundToMinorUnits('19.955', 'AUD')).toBe(1996); // 1995.5 → 1996
    expect(roundToMinorUnits('19.945', 'AUD')).toBe(1994); // 1994.5 → 1994
    expect(roundToMinorUnits('19.9451', 'AUD')).toBe(1995);
    expect(roundToMinorUnits('-0.125', 'AUD')).toBe(-12);
    expect(roundToMinorUnits('3', 'AUD')).toBe(300);
  });
});

describe('Money arithmetic', () => {
  it('adds and subtracts within one currency only', () => {
    expect(add(money(1995, 'AUD'), money(5, 'AUD'))).toEqual({ amountMinor: 2000, currency: 'AUD' });
    expect(subtract(money(1995, 'AUD'), money(2000, 'AUD')).amountMinor).toBe(-5);
    expect(moneyErrorCode(() => add(money(1, 'AUD'), money(1, 'USD')))).toBe('currency_mismatch');
    expect(moneyErrorCode(() => money(1.5, 'AUD'))).toBe('not_a_decimal');
  });
});
