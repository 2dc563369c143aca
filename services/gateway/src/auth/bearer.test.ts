import { describe, expect, it } from 'vitest';
import { parseBearer } from './bearer.js';

describe('parseBearer', () => {
  it('accepts exactly "Bearer <token>"', () => {
    expect(parseBearer('Bearer abc.def')).toBe('abc.def');
  });
  it.each([undefined, '', 'bearer abc', 'BEARER abc', 'Basic abc', 'Bearer  abc', 'Bearer', 'Bearer ', 'Bearer a b', 'Token abc', ' Bearer abc', 'Bearer\tabc'])(
    'rejects %j',
    (h) => {
      expect(parseBearer(h)).toBeUndefined();
    },
  );
});
