import { describe, expect, it } from 'vitest';
import { DEFAULT_FEE_TERMS, normalisePercent, platformFee } from './platform-fee.js';

describe('platform fee', () => {
  it('is 1.5 % + 0.30 by default, the percentage rounded half-even to the cent', () => {
    expect(platformFee(1995, 'AUD', DEFAULT_FEE_TERMS)).toBe(60); // 29.925 → 30, + 30
    expect(platformFee(1000, 'AUD', DEFAULT_FEE_TERMS)).toBe(45); // 15 exactly
    expect(platformFee(100, 'AUD', DEFAULT_FEE_TERMS)).toBe(32); // 1.5 → 2 (tie to even)
    expect(platformFee(300, 'AUD', DEFAULT_FEE_TERMS)).toBe(34); // 4.5 → 4 (tie to even)
    expect(platformFee(2100, 'AUD', DEFAULT_FEE_TERMS)).toBe(62); // 31.5 → 32 (tie to even)
  });

  it('never exceeds the charge', () => {
    expect(platformFee(20, 'AUD', DEFAULT_FEE_TERMS)).toBe(20);
  });

  it('takes merchant-specific terms, including zero', () => {
    expect(platformFee(12345, 'AUD', { percent: '2.9', fixedHundredths: 0 })).toBe(358); // 358.005 → 358
    expect(platformFee(12345, 'AUD', { percent: '0', fixedHundredths: 0 })).toBe(0);
    expect(platformFee(10000, 'AUD', { percent: '0.125', fixedHundredths: 5 })).toBe(17); // 12.5 → 12 (tie to even), + 5
  });

  it('takes the fixed part in major units of the charge currency, rounded to its minor unit', () => {
    expect(platformFee(2000, 'JPY', DEFAULT_FEE_TERMS)).toBe(30); // 30 yen + 0.30 yen → 0
    expect(platformFee(2000, 'JPY', { percent: '1.5', fixedHundredths: 150 })).toBe(32); // 30 + 1.5 → 2 (tie to even)
    expect(platformFee(19950, 'KWD', DEFAULT_FEE_TERMS)).toBe(599); // 299.25 → 299 fils + 300
    expect(platformFee(10, 'JPY', { percent: '0', fixedHundredths: 5000 })).toBe(10); // never more than the charge
  });

  it('reads the stored numeric as the shortest decimal', () => {
    expect(normalisePercent('1.5000')).toBe('1.5');
    expect(normalisePercent('2.0000')).toBe('2');
    expect(normalisePercent('0.1250')).toBe('0.125');
  });
});
