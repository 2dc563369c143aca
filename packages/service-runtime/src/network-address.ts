import { lookup as dnsLookup, type LookupAddress, type LookupAllOptions, type LookupOneOptions } from 'node:dns';
import { isIP } from 'node:net';

/** True for loopback, private (RFC 1918, ULA), link-local, CGNAT and unspecified addresses. */
export function isNonPublicAddress(address: string): boolean {
  if (isIP(address) === 4) {
    const [a, b] = address.split('.').map(Number) as [number, number];
    return a === 127 || a === 10 || a === 0 || (a === 172 && b >= 16 && b <= 31) || (a === 192 && b === 168) || (a === 169 && b === 254) || (a === 100 && b >= 64 && b <= 127);
  }
  const v6 = address.toLowerCase();
  if (v6.startsWith('::ffff:')) return isNonPublicAddress(v6.slice(7));
  return v6 === '::1' || v6 === '::' || v6.startsWith('fc') || v6.startsWith('fd') || v6.startsWith('fe8') || v6.startsWith('fe9') || v6.startsWith('fea') || v6.startsWith('feb');
}

export class NonPublicAddressError extends Error {
  readonly code = 'ENONPUBLIC';
  constructor(host: string) {
    super(`${host} resolves to a loopback, private or link-local address`);
  }
}

type LookupCallback = (err: NodeJS.ErrnoException | null, address: string | LookupAddress[], family?: number) => void;

/**
 * A `dns.lookup` replacement for outgoing connections (the `lookup` option of http/https
 * requests and agents) that refuses hosts resolving to a non-public address. Checking the
 * addresses the socket actually connects to, rather than resolving once beforehand, leaves no
 * window for DNS rebinding.
 */
export function publicOnlyLookup(hostname: string, options: LookupOneOptions | LookupAllOptions, callback: LookupCallback): void {
  dnsLookup(hostname, { ...options, all: true }, (err, addresses) => {
    if (err) return callback(err, '');
    const list = addresses as LookupAddress[];
    if (list.length === 0 || list.some((a) => isNonPublicAddress(a.address))) return callback(new NonPublicAddressError(hostname), '');
    if ((options as LookupAllOptions).all) return callback(null, list);
    const first = list[0]!;
    callback(null, first.address, first.family);
  });
}
