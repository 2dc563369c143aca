/**
 * Small HTTP client and setup steps for end-to-end tests: everything goes through the gateway
 * exactly as an integrator's client would.
 */
export interface ApiResponse<T = any> {
  status: number;
  headers: Headers;
  body: T;
}

export interface RequestOptions {
  token?: string;
  body?: unknown;
  /** Raw body string (sent as-is). */
  raw?: string;
  headers?: Record<string, string>;
}

export function apiClient(baseUrl: string) {
  async function request<T = any>(method: string, path: string, opts: RequestOptions = {}): Promise<ApiResponse<T>> {
    const headers: Record<string, string> = { ...(opts.headers ?? {}) };
    if (opts.token) headers.authorization = `Bearer ${opts.token}`;
    let body: string | undefined = opts.raw;
    if (opts.body !== undefined) {
      body = JSON.stringify(opts.body);
      headers['content-type'] ??= 'application/json';
    }
    const res = await fetch(baseUrl + path, { method, headers, body, redirect: 'manual' });
    const text = await res.text();
    let parsed: unknown = text;
    try {
      parsed = text ? JSON.parse(text) : undefined;
    } catch {
      /* not JSON: keep text */
    }
    return { status: res.status, headers: res.headers, body: parsed as T };
  }
  return {
    request,
    get: <T = any>(path: string, opts?: RequestOptions) => request<T>('GET', path, opts),
    post: <T = any>(path: string, body?: unknown, opts?: RequestOptions) => request<T>('POST', path, { ...opts, body }),
    put: <T = any>(path: string, body?: unknown, opts?: RequestOptions) => request<T>('PUT', path, { ...opts, body }),
    patch: <T = any>(path: string, body?: unknown, opts?: RequestOptions) => request<T>('PATCH', path, { ...opts, body }),
    del: <T = any>(path: string, opts?: RequestOptions) => request<T>('DELETE', path, opts),
  };
}
export type ApiClient = ReturnType<typeof apiClient>;

let seq = 0;
/** A unique suffix for emails and names within a test run. */
export function unique(prefix = 'x'): string {
  return `${prefix}${Date.now().toString(36)}${(seq++).toString(36)}${Math.random().toString(36).slice(2, 6)}`;
}

export async function createMerchant(api: ApiClient, adminToken: string, extra: Record<string, unknown> = {}) {
  const res = await api.post('/api/admin/merchants', { name: `Merchant ${unique()}`, contactEmail: `${unique('m')}@example.com`, ...extra }, { token: adminToken });
  if (res.status !== 201) throw new Error(`createMerchant: ${res.status} ${JSON.stringify(res.body)}`);
  return res.body as { id: string; [k: string]: unknown };
}

export async function createApiKey(api: ApiClient, adminToken: string, merchantId: string, extra: Record<string, unknown> = {}) {
  const res = await api.post(`/api/admin/merchants/${merchantId}/api-keys`, { name: 'test key', ...extra }, { token: adminToken });
  if (res.status !== 201) throw new Error(`createApiKey: ${res.status} ${JSON.stringify(res.body)}`);
  return res.body as { id: string; key: string; signingSecret: string; [k: string]: unknown };
}

export async function createMerchantUser(api: ApiClient, adminToken: string, merchantId: string, role = 'Owner', password = 'correct-horse-1') {
  const email = `${unique('u')}@example.com`;
  const res = await api.post(`/api/admin/merchants/${merchantId}/users`, { email, password, fullName: `User ${role}`, role }, { token: adminToken });
  if (res.status !== 201) throw new Error(`createMerchantUser: ${res.status} ${JSON.stringify(res.body)}`);
  const login = await api.post('/api/auth/login', { email, password });
  if (login.status !== 200) throw new Error(`login: ${login.status} ${JSON.stringify(login.body)}`);
  return { user: res.body as { id: string }, email, password, token: login.body.token as string };
}

/** Polls `check` until it returns a truthy value or the deadline passes (then returns the last value). */
export async function eventually<T>(check: () => Promise<T>, timeoutMs = 5000, intervalMs = 50): Promise<T> {
  const end = Date.now() + timeoutMs;
  let last = await check();
  while (!last && Date.now() < end) {
    await new Promise((r) => setTimeout(r, intervalMs));
    last = await check();
  }
  return last;
}
