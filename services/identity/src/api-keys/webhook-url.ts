import { lookup } from 'node:dns/promises';
import { isIP } from 'node:net';
import { DomainError } from '@billing/contracts';

const LOOPBACK_HOSTS = new Set(['localhost', '127.0.0.1', '::1', '[::1]']);

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

/**
 * Webhook URLs must be absolute https. Plain http is allowed only to loopback hosts outside
 * production. In production, a host that resolves to a non-public address is refused.
 */
export async function assertWebhookUrlAllowed(raw: string, production: boolean): Promise<void> {
  const url = new URL(raw);
  const host = url.hostname.toLowerCase();
  if (url.username || url.password) throw DomainError.field('webhookUrl', 'Must not contain credentials.');
  if (url.protocol === 'http:') {
    if (production || !LOOPBACK_HOSTS.has(host)) throw DomainError.field('webhookUrl', 'Must be an https URL (http is allowed only to loopback outside production).');
    return;
  }
  if (url.protocol !== 'https:') throw DomainError.field('webhookUrl', 'Must be an https URL.');
  if (!production) return;
  const bare = host.replace(/^\[|\]$/g, '');
  const addresses = isIP(bare) ? [bare] : await lookup(bare, { all: true }).then((r) => r.map((a) => a.address), () => null);
  if (!addresses) throw DomainError.field('webhookUrl', 'Host does not resolve.');
  if (addresses.some(isNonPublicAddress)) throw DomainError.field('webhookUrl', 'Must not resolve to a loopback, private or link-local address.');
}
