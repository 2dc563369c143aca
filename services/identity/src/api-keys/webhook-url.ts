import { lookup } from 'node:dns/promises';
import { isIP } from 'node:net';
import { DomainError } from '@billing/contracts';
import { isNonPublicAddress } from '@billing/service-runtime';

const LOOPBACK_HOSTS = new Set(['localhost', '127.0.0.1', '::1', '[::1]']);

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
