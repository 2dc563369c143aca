import { describe, expect, it } from 'vitest';
import { addressBlockOf, judgeAddress, judgeHost, publicOnlyLookup, type HostResolver } from './network-address.js';

/** A resolver with fixed answers, so host names are judged without a network. */
const fakeDns: HostResolver = async (host) => {
  const answers: Record<string, string[]> = {
    'hooks.example.com': ['93.184.215.14', '2606:2800:21f:cb07:6820:80da:af6b:8b2c'],
    'rebind.example.com': ['93.184.215.14', '10.0.0.7'],
    'mapped.example.com': ['::ffff:169.254.169.254'],
    'nat64.example.com': ['64:ff9b::a9fe:a9fe'],
    'v6only.example.com': ['2a00:1450:4001:80b::200e'],
    'ula.example.com': ['fd12:3456:789a::1'],
    'metadata.google.internal': ['169.254.169.254'],
  };
  const a = answers[host];
  if (!a) throw Object.assign(new Error(`getaddrinfo ENOTFOUND ${host}`), { code: 'ENOTFOUND' });
  return a;
};

/** Hosts judged through a parsed URL, exactly as a webhook URL's host is. */
const hostOf = (url: string) => new URL(url).hostname;

// [url, allowed, what it is]
const TABLE: [string, boolean, string][] = [
  // IPv4 literals, including the spellings WHATWG URL parsing normalises
  ['https://127.0.0.1/', false, 'loopback'],
  ['https://2130706433/', false, 'loopback as one decimal number'],
  ['https://0x7f.1/', false, 'loopback in hex shorthand'],
  ['https://0177.0.0.1/', false, 'loopback in octal'],
  ['https://10.0.0.1/', false, 'RFC 1918'],
  ['https://172.16.5.4/', false, 'RFC 1918'],
  ['https://192.168.1.1/', false, 'RFC 1918'],
  ['https://169.254.169.254/', false, 'link-local (cloud metadata)'],
  ['https://100.64.0.1/', false, 'CGNAT'],
  ['https://0.0.0.0/', false, 'unspecified'],
  ['https://224.0.0.1/', false, 'multicast'],
  ['https://255.255.255.255/', false, 'broadcast'],
  ['https://192.0.2.10/', false, 'documentation TEST-NET-1'],
  ['https://198.51.100.7/', false, 'documentation TEST-NET-2'],
  ['https://203.0.113.9/', false, 'documentation TEST-NET-3'],
  ['https://198.18.0.1/', false, 'benchmarking'],
  ['https://240.0.0.1/', false, 'reserved class E'],
  ['https://192.0.0.8/', false, 'IETF protocol assignments'],
  ['https://8.8.8.8/', true, 'global unicast'],
  ['https://172.32.0.1/', true, 'just outside 172.16/12'],
  // IPv6 literals
  ['https://[::1]/', false, 'loopback'],
  ['https://[::]/', false, 'unspecified'],
  ['https://[fe80::1]/', false, 'link-local'],
  ['https://[fd00::1]/', false, 'unique-local'],
  ['https://[fc00::1]/', false, 'unique-local'],
  ['https://[ff02::1]/', false, 'multicast'],
  ['https://[2001:db8::1]/', false, 'documentation'],
  ['https://[2001::1]/', false, 'Teredo'],
  ['https://[64:ff9b:1::a00:1]/', false, 'local-use NAT64'],
  ['https://[100::1]/', false, 'discard-only'],
  ['https://[2606:4700:4700::1111]/', true, 'global unicast'],
  // IPv6 forms wrapping an IPv4 address, judged by the IPv4 address
  ['https://[::ffff:127.0.0.1]/', false, 'IPv4-mapped loopback'],
  ['https://[::ffff:10.0.0.1]/', false, 'IPv4-mapped private'],
  ['https://[::ffff:169.254.169.254]/', false, 'IPv4-mapped link-local'],
  ['https://[::ffff:7f00:1]/', false, 'IPv4-mapped loopback in hex'],
  ['https://[::ffff:0:127.0.0.1]/', false, 'IPv4-translated loopback (RFC 6145)'],
  ['https://[::127.0.0.1]/', false, 'IPv4-compatible loopback'],
  ['https://[::10.1.2.3]/', false, 'IPv4-compatible private'],
  ['https://[64:ff9b::a9fe:a9fe]/', false, 'NAT64 of 169.254.169.254'],
  ['https://[64:ff9b::127.0.0.1]/', false, 'NAT64 of loopback'],
  ['https://[2002:7f00:1::]/', false, '6to4 of loopback'],
  ['https://[2002:c0a8:101::1]/', false, '6to4 of 192.168.1.1'],
  ['https://[::ffff:8.8.8.8]/', true, 'IPv4-mapped global'],
  ['https://[64:ff9b::808:808]/', true, 'NAT64 of 8.8.8.8'],
  ['https://[2002:808:808::1]/', true, '6to4 of 8.8.8.8'],
  // Host names: judged by every resolver answer
  ['https://localhost/', false, 'loopback name'],
  ['https://LOCALHOST./', false, 'loopback name, upper case with trailing dot'],
  ['https://api.localhost/', false, 'loopback name (RFC 6761 subdomain)'],
  ['https://rebind.example.com/', false, 'one private answer among public ones'],
  ['https://mapped.example.com/', false, 'answer is IPv4-mapped link-local'],
  ['https://nat64.example.com/', false, 'answer is NAT64 of link-local'],
  ['https://ula.example.com/', false, 'answer is unique-local'],
  ['https://metadata.google.internal/', false, 'cloud metadata name'],
  ['https://hooks.example.com/', true, 'public IPv4 and IPv6 answers'],
  ['https://v6only.example.com/', true, 'public IPv6 answer'],
];

describe('webhook egress address policy', () => {
  it('has a table of at least 25 cases', () => expect(TABLE.length).toBeGreaterThanOrEqual(25));

  it.each(TABLE)('%s → allowed %s (%s)', async (url, allowed) => {
    const verdict = await judgeHost(hostOf(url), fakeDns);
    expect(verdict.allowed).toBe(allowed);
    if (!verdict.allowed) expect(verdict.reason).toBe('address_refused');
  });

  it('reports a name that does not resolve as a DNS error, not as allowed', async () => {
    expect(await judgeHost('nowhere.example.com', fakeDns)).toMatchObject({ allowed: false, reason: 'dns_error' });
  });

  it('tells a lookup that failed for now (no answer, server failure) from a name that does not exist', async () => {
    const failing = (code: string): HostResolver => async () => {
      throw Object.assign(new Error(`getaddrinfo ${code}`), { code });
    };
    for (const code of ['EAI_AGAIN', 'ETIMEOUT', 'ESERVFAIL']) expect(await judgeHost('hooks.example.com', failing(code))).toMatchObject({ allowed: false, reason: 'dns_unavailable' });
    expect(await judgeHost('hooks.example.com', failing('ENOTFOUND'))).toMatchObject({ allowed: false, reason: 'dns_error' });
  });

  it('judges a wrapped IPv4 address by the address it carries', () => {
    expect(judgeAddress('64:ff9b::a9fe:a9fe')).toEqual({ allowed: false, judged: '169.254.169.254', range: 'linkLocal' });
    expect(judgeAddress('::ffff:127.0.0.1')).toMatchObject({ allowed: false, judged: '127.0.0.1', range: 'loopback' });
    expect(judgeAddress('2002:c0a8:101::1')).toMatchObject({ allowed: false, judged: '192.168.1.1', range: 'private' });
  });
});

describe('publicOnlyLookup (the HTTP sender’s resolver hook)', () => {
  it('refuses a host that resolves to loopback', async () => {
    const err = await new Promise<NodeJS.ErrnoException | null>((done) => publicOnlyLookup('localhost', {}, (e) => done(e)));
    expect(err?.code).toBe('ENONPUBLIC');
  });
  it('refuses a private address handed to it', async () => {
    const err = await new Promise<NodeJS.ErrnoException | null>((done) => publicOnlyLookup('10.0.0.1', { all: true }, (e) => done(e)));
    expect(err?.code).toBe('ENONPUBLIC');
  });
});

describe('addressBlockOf', () => {
  it('counts an IPv4 address as itself, and an IPv4-mapped IPv6 address as its IPv4 address', () => {
    expect(addressBlockOf('203.0.113.7')).toBe('203.0.113.7');
    expect(addressBlockOf('::ffff:203.0.113.7')).toBe('203.0.113.7');
    expect(addressBlockOf('::FFFF:203.0.113.7')).toBe('203.0.113.7');
  });

  it('counts every address of one IPv6 /64 as one client, however it is written', () => {
    const key = addressBlockOf('2001:db8:1:2::1');
    expect(key).toBe('2001:db8:1:2::/64');
    expect(addressBlockOf('2001:0db8:0001:0002:ffff:ffff:ffff:ffff')).toBe(key);
    expect(addressBlockOf('2001:DB8:1:2:0:0:0:99')).toBe(key);
    expect(addressBlockOf('2001:db8:1:3::1')).not.toBe(key);
  });

  it('expands "::" inside the /64', () => {
    expect(addressBlockOf('2001:db8::1')).toBe('2001:db8:0:0::/64');
    expect(addressBlockOf('::1')).toBe('0:0:0:0::/64');
    expect(addressBlockOf('fe80::')).toBe('fe80:0:0:0::/64');
  });
});
