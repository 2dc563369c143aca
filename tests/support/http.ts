/** A response as a test sees it: JSON bodies parsed, headers lower-cased. */
export interface HttpResponse<T = any> {
  status: number;
  headers: Record<string, string>;
  /** Parsed JSON when the content type is JSON (`application/json`, `application/problem+json`), else text. */
  body: T;
}

export interface HttpRequestOptions {
  /** Sent as `Authorization: Bearer <token>`. */
  token?: string;
  /** An object or array is sent as JSON; a string or bytes as they are. */
  body?: unknown;
  headers?: Record<string, string>;
}

export type HttpClient = <T = any>(method: string, path: string, opts?: HttpRequestOptions) => Promise<HttpResponse<T>>;

/** A client for `baseUrl` that never throws on an HTTP status, only on a transport failure. */
export function createHttpClient(baseUrl: string): HttpClient {
  return async (method, path, opts = {}) => {
    const headers: Record<string, string> = { ...opts.headers };
    if (opts.token) headers.authorization = `Bearer ${opts.token}`;
    let body: string | Uint8Array | undefined;
    if (typeof opts.body === 'string' || opts.body instanceof Uint8Array) body = opts.body;
    else if (opts.body !== undefined) {
      body = JSON.stringify(opts.body);
      if (!Object.keys(headers).some((h) => h.toLowerCase() === 'content-type')) headers['content-type'] = 'application/json';
    }
    const res = await fetch(new URL(path, baseUrl), { method, headers, body });
    const text = await res.text();
    const type = res.headers.get('content-type') ?? '';
    const isJson = /^application\/([\w.+-]+\+)?json\b/i.test(type);
    return {
      status: res.status,
      headers: Object.fromEntries(res.headers),
      body: isJson && text ? JSON.parse(text) : text,
    };
  };
}
