import { describe, expect, it } from 'vitest';
import { isNonPublicAddress, publicOnlyLookup } from './network-address.js';

describe('isNonPublicAddress', () => {
  it.each(['127.0.0.1', '10.1.2.3', '172.16.0.1', '172.31.255.255', '192.168.1.1', '169.254.169.254', '100.64.0.1', '::1', 'fe80::1', 'fd00::1', '::ffff:127.0.0.1', '0.0.0.0'])('%s is not public', (a) => {
    expect(isNonPublicAddress(a)).toBe(true);
  });
  it.each(['8.8.8.8', '172.32.0.1', '2606:4700::1111', '1.1.1.1'])('%s is public', (a) => {
    expect(isNonPublicAddress(a)).toBe(false);
  });
});

describe('publicOnlyLookup', () => {
  it('refuses a host that resolves to loopback', async () => {
    const err = await new Promise<NodeJS.ErrnoException | null>((done) => publicOnlyLookup('localhost', {}, (e) => done(e)));
    expect(err?.code).toBe('ENONPUBLIC');
  });
  it('refuses a literal private address', async () => {
    const err = await new Promise<NodeJS.ErrnoException | null>((done) => publicOnlyLookup('10.0.0.1', { all: true }, (e) => done(e)));
    expect(err?.code).toBe('ENONPUBLIC');
  });
});
