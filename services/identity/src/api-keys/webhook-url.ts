import { DomainError } from '@billing/contracts';
import { isLoopbackHost, judgeHost, type HostResolver } from '@billing/service-runtime';

/**
 * Webhook URLs must be absolute https. Plain http is allowed only to loopback hosts outside
 * production (`localhost`, 127.0.0.0/8, `::1`, IPv4-mapped 127.0.0.0/8: service-runtime's
 * `isLoopbackHost`). In production the host goes through the egress address policy the webhooks
 * service applies again at every connection (service-runtime's `judgeHost`): a literal or any
 * resolver answer that is not global unicast is refused, wrapped IPv4 forms included.
 */
export async function assertWebhookUrlAllowed(raw: string, production: boolean, resolve?: HostResolver): Promise<void> {
  const url = new URL(raw);
  if (url.username || url.password) throw DomainError.field('webhookUrl', 'Must not contain credentials.');
  if (url.protocol === 'http:') {
    if (production || !isLoopbackHost(url.hostname)) throw DomainError.field('webhookUrl', 'Must be an https URL (http is allowed only to loopback outside production).');
    return;
  }
  if (url.protocol !== 'https:') throw DomainError.field('webhookUrl', 'Must be an https URL.');
  if (!production) return;
  const verdict = await judgeHost(url.hostname, resolve);
  if (verdict.allowed) return;
  if (verdict.reason === 'dns_error') throw DomainError.field('webhookUrl', 'Host does not resolve.');
  // A lookup that failed for now says nothing of the URL: 503, to retry, not a 400 to fix it.
  if (verdict.reason === 'dns_unavailable')
    throw new DomainError('service_unavailable', "The webhook URL's host could not be looked up just now (no answer from DNS), so its addresses could not be checked; nothing was changed. Retry shortly.", { retryAfterSeconds: 5 });
  throw DomainError.field('webhookUrl', 'Must resolve only to public (global unicast) addresses; loopback, private, link-local, CGNAT, multicast, reserved and documentation ranges are refused, also inside IPv4-mapped, NAT64 and 6to4 forms.');
}
