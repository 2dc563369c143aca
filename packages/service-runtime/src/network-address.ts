import { lookup as dnsLookup, type LookupAddress, type LookupAllOptions, type LookupOneOptions } from 'node:dns';
import ipaddr from 'ipaddr.js';

/**
 * The egress address policy: which addresses an outgoing connection to a merchant-supplied URL
 * (webhook endpoints) may reach. One rule for literals in URLs and for resolver answers.
 *
 * IPv6 forms that carry an IPv4 address are unwrapped and judged by that address:
 * IPv4-mapped `::ffff:a.b.c.d`, IPv4-compatible `::a.b.c.d`, NAT64 `64:ff9b::/96` (RFC 6052)
 * and 6to4 `2002:AABB:CCDD::/48`. What is left must be global unicast: for IPv4 anything outside
 * loopback, RFC 1918, link-local, CGNAT, multicast, broadcast, unspecified, documentation,
 * benchmarking and other reserved ranges; for IPv6 only `2000::/3` outside its special ranges
 * (documentation, Teredo, ORCHID, benchmarking, local-use NAT64 …).
 */
export interface AddressVerdict {
  allowed: boolean;
  /** The address judged: the embedded IPv4 when the address was a wrapping form. */
  judged: string;
  /** ipaddr.js's range name of the judged address (`unicast` when global), or `invalid`. */
  range: string;
}

/** IPv4 special ranges ipaddr.js does not name, refused as well. */
const EXTRA_V4_REFUSED: [string, string][] = [
  ['192.0.0.0/24', 'ietfProtocolAssignments'],
  ['192.88.99.0/24', 'relay6to4'],
];

/** Judges one IP address literal (no brackets) under the production rule. */
export function judgeAddress(address: string): AddressVerdict {
  if (!ipaddr.isValid(address)) return { allowed: false, judged: address, range: 'invalid' };
  let ip = ipaddr.parse(address);
  if (ip.kind() === 'ipv6') {
    const embedded = embeddedIPv4(ip as ipaddr.IPv6);
    if (embedded === 'refuse') return { allowed: false, judged: ip.toString(), range: (ip as ipaddr.IPv6).range() };
    if (embedded) ip = embedded;
  }
  if (ip.kind() === 'ipv4') {
    const v4 = ip as ipaddr.IPv4;
    const range = v4.range();
    if (range !== 'unicast') return { allowed: false, judged: v4.toString(), range };
    for (const [cidr, name] of EXTRA_V4_REFUSED) if (v4.match(ipaddr.IPv4.parseCIDR(cidr))) return { allowed: false, judged: v4.toString(), range: name };
    return { allowed: true, judged: v4.toString(), range };
  }
  const v6 = ip as ipaddr.IPv6;
  const range = v6.range();
  const globalUnicast = v6.match(ipaddr.IPv6.parseCIDR('2000::/3'));
  return { allowed: range === 'unicast' && globalUnicast, judged: v6.toString(), range: range === 'unicast' && !globalUnicast ? 'reserved' : range };
}

/**
 * The IPv4 address a wrapping IPv6 form carries; `undefined` for a native IPv6 address;
 * `'refuse'` for forms whose target cannot be judged (local-use NAT64, Teredo).
 */
function embeddedIPv4(ip: ipaddr.IPv6): ipaddr.IPv4 | undefined | 'refuse' {
  const p = ip.parts;
  const v4At = (hi: number, lo: number) => new ipaddr.IPv4([hi >> 8, hi & 0xff, lo >> 8, lo & 0xff]);
  if (ip.isIPv4MappedAddress() || ip.range() === 'rfc6145') return v4At(p[6]!, p[7]!);
  // IPv4-compatible (deprecated, RFC 4291 §2.5.5.1): 96 zero bits; `::` and `::1` are IPv6's own.
  if (p.slice(0, 6).every((x) => x === 0) && !(p[6] === 0 && p[7]! <= 1)) return v4At(p[6]!, p[7]!);
  if (ip.match(ipaddr.IPv6.parseCIDR('64:ff9b::/96'))) return v4At(p[6]!, p[7]!);
  if (ip.range() === 'rfc6052' || ip.range() === 'teredo') return 'refuse';
  if (ip.range() === '6to4') return v4At(p[1]!, p[2]!);
  return undefined;
}

/** True when the production rule refuses the address (see `judgeAddress`). */
export function isNonPublicAddress(address: string): boolean {
  return !judgeAddress(address).allowed;
}

/** A URL's host as connected to: brackets removed, lower case, trailing dot dropped. */
export function bareHost(hostname: string): string {
  return hostname.replace(/^\[|\]$/g, '').toLowerCase().replace(/\.$/, '');
}

/**
 * True for a URL host (as `URL.hostname` gives it) that can only reach this machine: `localhost`,
 * any IPv4 address in 127.0.0.0/8, `::1`, or the IPv4-mapped form of a 127.0.0.0/8 address
 * (`::ffff:127.0.0.2`, which a dual-stack socket connects to over IPv4 loopback). A name that
 * merely begins with a loopback address (`127.0.0.1.example.com`) is a name, not loopback;
 * NAT64, 6to4 and IPv4-compatible forms leave the machine and are not loopback either.
 */
export function isLoopbackHost(hostname: string): boolean {
  const host = bareHost(hostname);
  if (host === 'localhost') return true;
  if (!ipaddr.isValid(host)) return false;
  const ip = ipaddr.parse(host);
  if (ip.kind() === 'ipv6' && (ip as ipaddr.IPv6).isIPv4MappedAddress()) return (ip as ipaddr.IPv6).toIPv4Address().range() === 'loopback';
  return ip.range() === 'loopback';
}

/**
 * The block of addresses one client is taken to hold, as a key: an IPv4 address itself, an
 * IPv4-mapped IPv6 address as its IPv4 address, any other IPv6 address as its /64 (a single
 * client is commonly given a whole /64), however it is written; '' for anything else.
 */
export function addressBlockOf(address: string | undefined): string {
  if (!address || !ipaddr.isValid(address)) return '';
  const ip = ipaddr.parse(address);
  if (ip.kind() === 'ipv4') return ip.toString();
  const v6 = ip as ipaddr.IPv6;
  if (v6.isIPv4MappedAddress()) return v6.toIPv4Address().toString();
  return `${v6.parts.slice(0, 4).map((p) => p.toString(16)).join(':')}::/64`;
}

/** Names that resolve to loopback by definition (RFC 6761), refused without asking a resolver. */
export function isLoopbackName(host: string): boolean {
  const h = bareHost(host);
  return h === 'localhost' || h.endsWith('.localhost');
}

export class NonPublicAddressError extends Error {
  readonly code = 'ENONPUBLIC';
  constructor(host: string, verdict?: AddressVerdict) {
    super(`${host} is not a public address${verdict ? ` (${verdict.judged}: ${verdict.range})` : ''}`);
  }
}

export type HostResolver = (host: string) => Promise<string[]>;

const systemResolver: HostResolver = (host) =>
  new Promise((resolve, reject) => dnsLookup(host, { all: true }, (err, list) => (err ? reject(err) : resolve(list.map((a) => a.address)))));

export type HostVerdict = { allowed: true; addresses: string[] } | { allowed: false; reason: 'address_refused' | 'dns_error' | 'dns_unavailable'; detail: string };

/** Resolver errors that say the lookup could not be made now (no answer, a server failure), not that the name does not exist. */
const TEMPORARY_DNS_ERRORS = new Set(['EAI_AGAIN', 'ETIMEOUT', 'ESERVFAIL', 'ECONNREFUSED', 'ETIMEDOUT']);

/**
 * Judges a URL host (as `URL.hostname` gives it: WHATWG parsing already turned `0x7f.1` or
 * `2130706433` into `127.0.0.1`): a literal by the address rule, a name by every address the
 * resolver answers (one non-public answer refuses the host). A lookup that failed for now (the
 * resolver did not answer, or failed) is `dns_unavailable`, not `dns_error`: the name may well
 * resolve a moment later.
 */
export async function judgeHost(hostname: string, resolve: HostResolver = systemResolver): Promise<HostVerdict> {
  const host = bareHost(hostname);
  if (ipaddr.isValid(host)) {
    const v = judgeAddress(host);
    return v.allowed ? { allowed: true, addresses: [host] } : { allowed: false, reason: 'address_refused', detail: `${v.judged} is ${v.range}` };
  }
  if (isLoopbackName(host)) return { allowed: false, reason: 'address_refused', detail: `${host} is a loopback name` };
  let addresses: string[];
  try {
    addresses = await resolve(host);
  } catch (e) {
    const code = (e as { code?: unknown }).code;
    if (typeof code === 'string' && TEMPORARY_DNS_ERRORS.has(code)) return { allowed: false, reason: 'dns_unavailable', detail: `${host} could not be looked up (${code})` };
    return { allowed: false, reason: 'dns_error', detail: `${host} does not resolve` };
  }
  if (addresses.length === 0) return { allowed: false, reason: 'dns_error', detail: `${host} does not resolve` };
  for (const a of addresses) {
    const v = judgeAddress(a);
    if (!v.allowed) return { allowed: false, reason: 'address_refused', detail: `${host} resolves to ${v.judged} (${v.range})` };
  }
  return { allowed: true, addresses };
}

type LookupCallback = (err: NodeJS.ErrnoException | null, address: string | LookupAddress[], family?: number) => void;

/**
 * A `dns.lookup` replacement for outgoing connections (the `lookup` option of http/https
 * requests) that refuses hosts resolving to a non-public address. Checking the addresses the
 * socket actually connects to, rather than resolving once beforehand, leaves no window for DNS
 * rebinding. Node calls it only for names; literal hosts must be judged with `judgeAddress`.
 */
export function publicOnlyLookup(hostname: string, options: LookupOneOptions | LookupAllOptions, callback: LookupCallback): void {
  if (isLoopbackName(hostname)) return callback(new NonPublicAddressError(hostname), '');
  dnsLookup(hostname, { ...options, all: true }, (err, addresses) => {
    if (err) return callback(err, '');
    const list = addresses as LookupAddress[];
    if (list.length === 0) return callback(Object.assign(new Error(`${hostname} has no addresses`), { code: 'ENOTFOUND' }), '');
    for (const a of list) {
      const v = judgeAddress(a.address);
      if (!v.allowed) return callback(new NonPublicAddressError(hostname, v), '');
    }
    if ((options as LookupAllOptions).all) return callback(null, list);
    const first = list[0]!;
    callback(null, first.address, first.family);
  });
}
