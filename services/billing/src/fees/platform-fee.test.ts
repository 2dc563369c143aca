import { describe, expect, it } from 'vitest';
import { DEFAULT_FEE_TERMS, normalisePercent, platformFee } from './platform-fee.js';

describe('platform fee', () => {
  it('is 1.5 % + 0.30 by default, the percentage rounded half-even to the cent', () => {
    expect(platformFee(1995, DEFAULT_FEE_TERMS)).toBe(60); // 29.925 → 30, + 30
    expect(platformFee(1000, DEFAULT_FEE_TERMS)).toBe(45); // 15 exactly
    expect(platformFee(100, DEFAULT_FEE_TERMS)).toBe(32); // 1.5 → 2 (tie to even)
    expect(platformFee(300, DEFAULT_FEE_TERMS)).toBe(34); // 4.5 → 4 (tie to even)
    expect(platformFee(2100, DEFAULT_FEE_TERMS)).toBe(62); // 31.5 → 32 (tie to even)
  });

  it('never exceeds the charge', () => {
    expect(platformFee(20, DEFAULT_FEE_TERMS)).toBe(20);
  });

  it('takes merchant-specific terms, including zero', () => {
    expect(platformFee(12345, { percent: '2.9', fixedMinor: 0 })).toBe(358); // 358.005 → 358
    expect(platformFee(12345, { percent: '0', fixedMinor: 0 })).toBe(0);
    expect(platformFee(10000, { percent: '0.125', fixedMinor: 5 })).toBe(17); // 12.5 → 12 (tie to even), + 5
  });

  it('reads the stored numeric as the shortest decimal', () => {
    expect(normalisePercent('1.5000')).toBe('1.5');
    expect(normalisePercent('2.0000')).toBe('2');
    expect(normalisePercent('0.1250')).toBe('0.125');
  });
});
