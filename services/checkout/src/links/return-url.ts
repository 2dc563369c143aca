import { hasNonUriCharacter } from '@billing/contracts';
import { isLoopbackHost } from '@billing/service-runtime';

/**
 * Why `raw` cannot be a checkout return URL, or undefined when it can: absolute https without
 * credentials (plain http only to a loopback host outside production: `localhost`, 127.0.0.0/8, `::1`; see `isLoopbackHost`). The page sends the browser
 * there, so nothing else (javascript:, data:) may pass.
 */
export function returnUrlProblem(raw: string, production: boolean): string | undefined {
  // The URL is kept and answered exactly as sent; `new URL` would trim it (and encode a space inside).
  if (hasNonUriCharacter(raw)) return 'Must be an absolute URL.';
  let url: URL;
  try {
    url = new URL(raw);
  } catch {
    return 'Must be an absolute URL.';
  }
  if (url.username || url.password) return 'Must not contain credentials.';
  if (url.protocol === 'https:') return undefined;
  if (url.protocol === 'http:' && !production && isLoopbackHost(url.hostname)) return undefined;
  return 'Must be an https URL (http is allowed only to loopback outside production).';
}
