import { describe, expect, it } from 'vitest';
import { connectionKeyOf } from './connection-cap.js';

describe('connectionKeyOf', () => {
  it('counts an IPv4 address as itself, and an IPv4-mapped IPv6 address as its IPv4 address', () => {
    expect(connectionKeyOf('203.0.113.7')).toBe('203.0.113.7');
    expect(connectionKeyOf('::ffff:203.0.113.7')).toBe('203.0.113.7');
    expect(connectionKeyOf('::FFFF:203.0.113.7')).toBe('203.0.113.7');
  });

  it('counts every address of one IPv6 /64 as one client, however it is written', () => {
    const key = connectionKeyOf('2001:db8:1:2::1');
    expect(key).toBe('2001:db8:1:2::/64');
    expect(connectionKeyOf('2001:0db8:0001:0002:ffff:ffff:ffff:ffff')).toBe(key);
    expect(connectionKeyOf('2001:DB8:1:2:0:0:0:99')).toBe(key);
    expect(connectionKeyOf('2001:db8:1:3::1')).not.toBe(key);
  });

  it('expands "::" inside the /64', () => {
    expect(connectionKeyOf('2001:db8::1')).toBe('2001:db8:0:0::/64');
    expect(connectionKeyOf('::1')).toBe('0:0:0:0::/64');
    expect(connectionKeyOf('fe80::')).toBe('fe80:0:0:0::/64');
  });
});
