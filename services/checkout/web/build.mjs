// Builds the browser pages: each folder under web/pages/ is one page (`index.html` + `main.ts`),
// bundled by esbuild into dist/web/ (`<page>.html`, `assets/<page>.js`) with the shared
// stylesheet as `assets/pages.css`. Plain TypeScript and the DOM: no framework, no CDN.
import { build } from 'esbuild';
import { copyFileSync, mkdirSync, readdirSync, rmSync } from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

const webDir = path.dirname(fileURLToPath(import.meta.url));
const outDir = path.join(webDir, '..', 'dist', 'web');
const pages = readdirSync(path.join(webDir, 'pages'), { withFileTypes: true }).filter((d) => d.isDirectory()).map((d) => d.name);

rmSync(outDir, { recursive: true, force: true });
mkdirSync(path.join(outDir, 'assets'), { recursive: true });
await build({
  entryPoints: Object.fromEntries(pages.map((p) => [p, path.join(webDir, 'pages', p, 'main.ts')])),
  outdir: path.join(outDir, 'assets'),
  bundle: true,
  format: 'esm',
  target: ['es2020'],
  minify: true,
  sourcemap: false,
  legalComments: 'none',
  logLevel: 'warning',
});
for (const p of pages) copyFileSync(path.join(webDir, 'pages', p, 'index.html'), path.join(outDir, `${p}.html`));
copyFileSync(path.join(webDir, 'shared', 'pages.css'), path.join(outDir, 'assets', 'pages.css'));
console.log(`pages built: ${pages.join(', ')} → ${path.relative(process.cwd(), outDir)}`);
