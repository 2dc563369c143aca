import { describe, expect, it } from 'vitest';
import { instantOfRow } from './database.js';

describe('instantOfRow', () => {
  it('reads Postgres timestamptz text with the year as written, 0001 to 9999', () => {
    expect(instantOfRow('0050-03-01 00:00:00+00').toISOString()).toBe('0050-03-01T00:00:00.000Z');
    expect(instantOfRow('0001-01-01 00:00:00+00').toISOString()).toBe('0001-01-01T00:00:00.000Z');
    expect(instantOfRow('0099-12-31 23:59:59.999+00').toISOString()).toBe('0099-12-31T23:59:59.999Z');
    expect(instantOfRow('2030-01-15 10:00:00.123456+00').toISOString()).toBe('2030-01-15T10:00:00.123Z');
    expect(instantOfRow('9999-12-31 23:59:59.999+00').toISOString()).toBe('9999-12-31T23:59:59.999Z');
  });

  it('reads zones other than UTC, ISO 8601 (to_jsonb) and Dates', () => {
    expect(instantOfRow('2030-01-15 10:00:00+10').toISOString()).toBe('2030-01-15T00:00:00.000Z');
    expect(instantOfRow('2030-01-15 10:00:00+05:30').toISOString()).toBe('2030-01-15T04:30:00.000Z');
    expect(instantOfRow('0050-03-01T00:00:00+00:00').toISOString()).toBe('0050-03-01T00:00:00.000Z');
    const d = new Date('2030-01-15T00:00:00.000Z');
    expect(instantOfRow(d)).toBe(d);
  });

  it('refuses what is not a timestamp', () => {
    expect(() => instantOfRow('not a time')).toThrow(/Not a Postgres timestamp/);
  });
});
