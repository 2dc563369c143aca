import { createHash } from 'node:crypto';
import { readFile } from 'node:fs/promises';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import type { ServiceImpl } from '@billing/service-runtime';
import type { PageAsset__Output } from '@billing/proto-types/checkout/v1/PageAsset';

/** Where `web/build.mjs` puts the built pages: dist/web beside this service's compiled code. */
export const DEFAULT_PAGES_DIR = path.join(path.dirname(fileURLToPath(import.meta.url)), '..', 'web');

const CONTENT_TYPES: Record<string, string> = {
  '.html': 'text/html; charset=utf-8',
  '.js': 'text/javascript; charset=utf-8',
  '.css': 'text/css; charset=utf-8',
  '.svg': 'image/svg+xml',
  '.png': 'image/png',
  '.woff2': 'font/woff2',
};

/** A page name (`checkout`) → `<name>.html`; `assets/<file>` → that built asset; anything else: nothing. */
function fileOf(requested: string): string | undefined {
  if (/^[a-z][a-z0-9-]{0,40}$/.test(requested)) return `${requested}.html`;
  const m = /^assets\/([A-Za-z0-9][A-Za-z0-9._-]{0,100})$/.exec(requested);
  return m && !m[1]!.includes('..') ? `assets/${m[1]}` : undefined;
}

/**
 * `checkout.v1.Pages`: the built browser pages, read once from disk and kept in memory (they
 * change only with a new build, which means a new process).
 */
export function pagesGrpc(dir = DEFAULT_PAGES_DIR): ServiceImpl<'checkout.v1.Pages'> {
  const NOT_FOUND: PageAsset__Output = { found: false, content: Buffer.alloc(0), contentType: '', etag: '' };
  const cache = new Map<string, Promise<PageAsset__Output>>();
  const load = async (file: string): Promise<PageAsset__Output> => {
    try {
      const content = await readFile(path.join(dir, file));
      return { found: true, content, contentType: CONTENT_TYPES[path.extname(file)] ?? 'application/octet-stream', etag: `"${createHash('sha256').update(content).digest('base64url').slice(0, 22)}"` };
    } catch {
      return NOT_FOUND;
    }
  };
  return {
    GetPageAsset: async (req) => {
      const file = fileOf(req.path);
      if (!file) return NOT_FOUND;
      let hit = cache.get(file);
      if (!hit) {
        hit = load(file);
        cache.set(file, hit);
      }
      const asset = await hit;
      if (!asset.found) cache.delete(file);
      return asset;
    },
  };
}
