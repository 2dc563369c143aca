/** What a JSON call to the platform answered; `status` 0 means the request never got an answer. */
export interface ApiResult<T = any> {
  status: number;
  body: T | undefined;
  /** The answer's Retry-After, in seconds, when it gave one. */
  retryAfterSeconds?: number;
}

/** "about N minutes" (or seconds) for a wait the API asked for; "a moment" without one. */
export function waitText(seconds: number | undefined): string {
  if (!seconds || seconds <= 0) return 'a moment';
  if (seconds < 90) return `about ${Math.ceil(seconds)} seconds`;
  return `about ${Math.ceil(seconds / 60)} minutes`;
}

/** The `errors` map of a validation problem: field → messages. */
export type FieldErrors = Record<string, string[]>;

/** A JSON request to the platform's API (same origin). Network failures come back as status 0. */
export async function callApi<T = any>(method: string, path: string, opts: { token?: string; body?: unknown } = {}): Promise<ApiResult<T>> {
  const headers: Record<string, string> = { accept: 'application/json' };
  if (opts.token) headers.authorization = `Bearer ${opts.token}`;
  if (opts.body !== undefined) headers['content-type'] = 'application/json';
  let res: Response;
  try {
    res = await fetch(path, { method, headers, body: opts.body === undefined ? undefined : JSON.stringify(opts.body), credentials: 'omit', cache: 'no-store' });
  } catch {
    return { status: 0, body: undefined };
  }
  const text = await res.text().catch(() => '');
  let body: T | undefined;
  try {
    body = text ? (JSON.parse(text) as T) : undefined;
  } catch {
    body = undefined;
  }
  const retryAfter = Number(res.headers.get('retry-after'));
  return { status: res.status, body, ...(Number.isFinite(retryAfter) && retryAfter > 0 ? { retryAfterSeconds: retryAfter } : {}) };
}

export const sleep = (ms: number) => new Promise<void>((r) => setTimeout(r, ms));
