import { describe, expect, it } from 'vitest';
import { addDays, periodEnd } from './billing-interval.js';

const at = (iso: string) => new Date(iso);

describe('periodEnd', () => {
  it('adds whole weeks and fortnights', () => {
    expect(periodEnd(at('2026-01-01T10:00:00Z'), { interval: 'Week', intervalCount: 1 }).toISOString()).toBe('2026-01-08T10:00:00.000Z');
    expect(periodEnd(at('2026-01-01T10:00:00Z'), { interval: 'Week', intervalCount: 3 }).toISOString()).toBe('2026-01-22T10:00:00.000Z');
    expect(periodEnd(at('2026-01-01T10:00:00Z'), { interval: 'Fortnight', intervalCount: 1 }).toISOString()).toBe('2026-01-15T10:00:00.000Z');
  });

  it('adds calendar months, clamping to the end of short months without drifting', () => {
    const anchor = at('2026-01-31T09:30:00Z');
    const monthly = { interval: 'Month' as const, intervalCount: 1 };
    const feb = periodEnd(anchor, monthly);
    expect(feb.toISOString()).toBe('2026-02-28T09:30:00.000Z');
    const mar = periodEnd(feb, monthly, anchor);
    expect(mar.toISOString()).toBe('2026-03-31T09:30:00.000Z');
    expect(periodEnd(mar, monthly, anchor).toISOString()).toBe('2026-04-30T09:30:00.000Z');
    expect(periodEnd(at('2027-12-15T00:00:00Z'), { interval: 'Month', intervalCount: 3 }).toISOString()).toBe('2028-03-15T00:00:00.000Z');
  });

  it('adds years, keeping Feb 29 anchors on the last day of February', () => {
    expect(periodEnd(at('2028-02-29T00:00:00Z'), { interval: 'Year', intervalCount: 1 }).toISOString()).toBe('2029-02-28T00:00:00.000Z');
    expect(periodEnd(at('2029-02-28T00:00:00Z'), { interval: 'Year', intervalCount: 3 }, at('2028-02-29T00:00:00Z')).toISOString()).toBe('2032-02-29T00:00:00.000Z');
  });

  it('keeps the years 0001 to 0099 as they are (Date.UTC reads them as 1901 to 1999)', () => {
    expect(periodEnd(at('0001-01-01T00:00:00Z'), { interval: 'Month', intervalCount: 1 }).toISOString()).toBe('0001-02-01T00:00:00.000Z');
    expect(periodEnd(at('0050-06-15T08:00:00Z'), { interval: 'Month', intervalCount: 1 }).toISOString()).toBe('0050-07-15T08:00:00.000Z');
    expect(periodEnd(at('0001-03-01T00:00:00Z'), { interval: 'Year', intervalCount: 1 }).toISOString()).toBe('0002-03-01T00:00:00.000Z');
    // 0004 is a leap year: a 31 January anchor ends its first month on 29 February.
    expect(periodEnd(at('0004-01-31T00:00:00Z'), { interval: 'Month', intervalCount: 1 }).toISOString()).toBe('0004-02-29T00:00:00.000Z');
  });

  it('clamps a 31st anchor to Feb 29 in a leap year, and Fortnight × 2 is 28 days', () => {
    const anchor = at('2028-01-31T00:00:00Z');
    expect(periodEnd(anchor, { interval: 'Month', intervalCount: 1 }).toISOString()).toBe('2028-02-29T00:00:00.000Z');
    expect(periodEnd(at('2028-02-29T00:00:00Z'), { interval: 'Month', intervalCount: 1 }, anchor).toISOString()).toBe('2028-03-31T00:00:00.000Z');
    expect(periodEnd(at('2028-02-20T00:00:00Z'), { interval: 'Fortnight', intervalCount: 2 }).toISOString()).toBe('2028-03-19T00:00:00.000Z');
  });

  it('puts retry offsets in days across a month end and a leap day', () => {
    expect([1, 3, 7].map((d) => addDays(at('2028-02-27T12:00:00Z'), d).toISOString())).toEqual(['2028-02-28T12:00:00.000Z', '2028-03-01T12:00:00.000Z', '2028-03-05T12:00:00.000Z']);
  });

  it('refuses a non-positive count', () => {
    expect(() => periodEnd(new Date(), { interval: 'Month', intervalCount: 0 })).toThrow(RangeError);
  });

  it('adds days', () => {
    expect(addDays(at('2026-03-01T00:00:00Z'), 14).toISOString()).toBe('2026-03-15T00:00:00.000Z');
  });
});
