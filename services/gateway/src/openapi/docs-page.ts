import { createHash } from 'node:crypto';
import { readFileSync } from 'node:fs';
import { createRequire } from 'node:module';

/**
 * The `/docs` API reference: Scalar's standalone bundle, served by the gateway from the npm
 * package (no CDN, no fonts or proxies from elsewhere), rendering `/openapi.json` with
 * navigation, search, request examples in several languages and a "try it" client that calls
 * this gateway directly.
 */
export const DOCS_SCRIPT_PATH = '/docs/api-reference.js';

/** The bundle's bytes (read by the gateway once, on the first request for it). */
export function loadDocsScript(): Buffer {
  return readFileSync(createRequire(import.meta.url).resolve('@scalar/api-reference/browser/standalone.js'));
}

const CONFIG = {
  url: '/openapi.json',
  withDefaultFonts: false,
  hideClientButton: true,
  showDeveloperTools: 'never',
  agent: { disabled: true },
  mcp: { disabled: true },
  telemetry: false,
  defaultOpenAllTags: false,
  hideModels: false,
  documentDownloadType: 'json',
  // "Powered by" links lead outside the repository; the reference stands on its own.
  customCss: 'a[href*="scalar.com"]{display:none!important}',
};

/** The page's one inline script: it starts the reference. */
const START_SCRIPT = `Scalar.createApiReference('#app', ${JSON.stringify(CONFIG)});`;

/**
 * The page's Content-Security-Policy: nothing by default; scripts only the gateway's bundle and
 * the inline start above (by its hash, so no other inline script runs); styles the bundle injects
 * (inline, as Scalar renders its themes); images the bundle's own and data URLs; requests (the
 * document, the "try it" client) to this gateway alone; no framing, plugins, base or form targets.
 */
export const DOCS_CSP = [
  "default-src 'none'",
  `script-src 'self' 'sha256-${createHash('sha256').update(START_SCRIPT).digest('base64')}'`,
  "style-src 'self' 'unsafe-inline'",
  "img-src 'self' data: blob:",
  "font-src 'self' data:",
  "connect-src 'self'",
  "worker-src 'self' blob:",
  "frame-ancestors 'none'",
  "object-src 'none'",
  "base-uri 'none'",
  "form-action 'none'",
].join('; ');

export const DOCS_HTML = `<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>Subscription Billing Platform API reference</title>
</head>
<body>
<noscript>The API reference needs JavaScript; the machine-readable document is at <a href="/openapi.json">/openapi.json</a>.</noscript>
<div id="app"></div>
<script src="${DOCS_SCRIPT_PATH}"></script>
<script>${START_SCRIPT}</script>
</body>
</html>`;
