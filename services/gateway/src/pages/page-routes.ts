import type { FastifyInstance, FastifyReply } from 'fastify';
import type { Logger } from '@billing/service-runtime';
import type { PageAsset__Output } from '@billing/proto-types/checkout/v1/PageAsset';

/** The part of the `checkout.v1.Pages` client the gateway uses. */
export interface PagesClient {
  GetPageAsset(req: { path: string }): Promise<PageAsset__Output>;
}

/**
 * The browser pages the platform serves at `{public base}/<name>`, each built from
 * services/checkout/web/pages/<name>/ and fetched from the checkout service's Pages RPC.
 * Adding a page is a folder there and its name here.
 */
export const PAGES = ['checkout', 'onboard', 'reset-password', 'verify-email'] as const;

/**
 * Pages run only their own bundled script and stylesheet (no inline script or style, no third
 * party); they call only this origin; no site may frame them.
 */
export const PAGE_CSP = [
  "default-src 'none'",
  "script-src 'self'",
  "style-src 'self'",
  "img-src 'self'",
  "connect-src 'self'",
  "form-action 'self'",
  "base-uri 'none'",
  "frame-ancestors 'none'",
].join('; ');

const SECURITY_HEADERS: Record<string, string> = {
  'content-security-policy': PAGE_CSP,
  'x-content-type-options': 'nosniff',
  // Signed and emailed links carry their credential in the query string: never send it on as a Referer.
  'referrer-policy': 'no-referrer',
  'x-frame-options': 'DENY',
};

/** How long the gateway reuses an asset it fetched (pages change only with a deploy). */
const CACHE_MS = 60_000;

interface CachedAsset {
  found: boolean;
  content: Buffer;
  contentType: string;
  etag: string;
  at: number;
}

/** Serves the pages and their assets through the gateway, caching what checkout answered. */
export function registerPages(app: FastifyInstance, pages: PagesClient, logger: Logger): void {
  const cache = new Map<string, CachedAsset>();
  const fetchAsset = async (path: string): Promise<CachedAsset> => {
    const hit = cache.get(path);
    if (hit && Date.now() - hit.at < CACHE_MS) return hit;
    const a = await pages.GetPageAsset({ path });
    const asset = { found: a.found, content: Buffer.from(a.content ?? []), contentType: a.contentType, etag: a.etag, at: Date.now() };
    if (asset.found) cache.set(path, asset);
    return asset;
  };

  const send = async (reply: FastifyReply, path: string, ifNoneMatch: string | undefined, cacheControl: string) => {
    let asset: CachedAsset;
    try {
      asset = await fetchAsset(path);
    } catch (e) {
      logger.warn({ err: e, path }, 'page asset unavailable');
      return reply.code(503).headers(SECURITY_HEADERS).header('retry-after', '1').type('text/plain; charset=utf-8').send('The page is temporarily unavailable. Please try again in a moment.');
    }
    reply.headers(SECURITY_HEADERS);
    if (!asset.found) return reply.code(404).type('text/plain; charset=utf-8').send('Not found.');
    reply.header('cache-control', cacheControl).header('etag', asset.etag);
    if (ifNoneMatch === asset.etag) return reply.code(304).send();
    return reply.code(200).type(asset.contentType).send(asset.content);
  };

  for (const page of PAGES) {
    app.get(`/${page}`, (req, reply) => send(reply, page, req.headers['if-none-match'], 'no-store'));
  }
  app.get<{ Params: { file: string } }>('/assets/:file', (req, reply) => send(reply, `assets/${req.params.file}`, req.headers['if-none-match'], 'public, max-age=300'));
}
