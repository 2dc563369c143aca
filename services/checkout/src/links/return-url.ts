const LOOPBACK_HOSTS = new Set(['localhost', '127.0.0.1', '[::1]']);

/**
 * Why `raw` cannot be a checkout return URL, or undefined when it can: absolute https without
 * credentials (plain http only to loopback outside production). The page sends the browser
 * there, so nothing else (javascript:, data:) may pass.
 */
export function returnUrlProblem(raw: string, production: boolean): string | undefined {
  let url: URL;
  try {
    url = new URL(raw);
  } catch {
    return 'Must be an absolute URL.';
  }
  if (url.username || url.password) return 'Must not contain credentials.';
  if (url.protocol === 'https:') return undefined;
  if (url.protocol === 'http:' && !production && LOOPBACK_HOSTS.has(url.hostname.toLowerCase())) return undefined;
  return 'Must be an https URL (http is allowed only to loopback outside production).';
}
