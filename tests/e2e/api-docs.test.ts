import { existsSync, mkdirSync } from 'node:fs';
import { join, resolve } from 'node:path';
import { chromium, type Browser } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, inject, it } from 'vitest';

/**
 * `/docs` in headless Chromium (Debian's `chromium` package, driven by playwright-core): the
 * reference renders from the gateway alone (no request leaves it), with navigation, search and
 * request examples. Regression for a page of ~4,700 px of text before the first endpoint,
 * unresolved `$ref`s and no search. A screenshot lands in `.data/screenshots/` (ignored by git).
 */
const CHROMIUM = process.env.CHROMIUM_PATH ?? '/usr/bin/chromium';
const root = resolve(import.meta.dirname, '../..');
const gatewayUrl = inject('gatewayUrl');
let browser: Browser;

beforeAll(async () => {
  if (!existsSync(CHROMIUM)) throw new Error(`${CHROMIUM} is missing: install Debian's chromium package (apt-get install -y chromium) or set CHROMIUM_PATH`);
  browser = await chromium.launch({
    executablePath: CHROMIUM,
    args: ['--headless', '--no-sandbox', '--disable-gpu', '--disable-background-networking', '--disable-component-update', '--disable-sync', '--no-first-run'],
  });
}, 60_000);

afterAll(async () => {
  await browser?.close();
});

describe('/docs API reference', () => {
  it('renders navigation, search and request examples from the gateway alone', async () => {
    const page = await browser.newPage({ viewport: { width: 1400, height: 1000 } });
    const outside: string[] = [];
    const origin = new URL(gatewayUrl).origin;
    page.on('request', (r) => {
      const u = r.url();
      if (!u.startsWith(origin) && !u.startsWith('data:') && !u.startsWith('blob:')) outside.push(u);
    });
    const errors: string[] = [];
    page.on('pageerror', (e) => errors.push(e.message));
    // What the page's Content-Security-Policy blocked: the reference must need nothing it refuses.
    const blocked: string[] = [];
    page.on('console', (m) => {
      if (/Content Security Policy/i.test(m.text())) blocked.push(m.text());
    });

    const res = await page.goto(`${gatewayUrl}/docs`, { waitUntil: 'networkidle' });
    expect(res?.status()).toBe(200);
    const csp = res!.headers()['content-security-policy'] ?? '';
    for (const directive of ["default-src 'none'", "connect-src 'self'", "frame-ancestors 'none'", "object-src 'none'"]) expect(csp).toContain(directive);
    // Inline scripts only by hash: no 'unsafe-inline' or 'unsafe-eval' for scripts.
    expect(csp.split(';').find((d) => d.trim().startsWith('script-src'))).not.toMatch(/unsafe/);
    // Navigation: the sidebar lists the tags; opening one shows its operations.
    const sidebar = page.locator('aside').first();
    await sidebar.getByText('Webhook deliveries', { exact: true }).first().waitFor({ timeout: 60_000 });
    const nav = await sidebar.innerText();
    for (const tag of ['Members', 'Subscriptions', 'Webhook deliveries', 'Webhook events']) expect(nav).toContain(tag);
    expect(await page.locator('body').innerText()).not.toContain('#/components/schemas/');

    // Search finds operations and webhook events.
    await sidebar.getByText('Search', { exact: true }).first().click();
    const search = page.locator('input[role="combobox"]').first();
    await search.waitFor({ timeout: 10_000 });
    await search.fill('subscription');
    await page.getByText('Pause a subscription').first().waitFor({ timeout: 10_000 });
    await page.getByText('A subscription was created').first().waitFor({ timeout: 10_000 });
    await page.keyboard.press('Escape');

    // A request example with the documented body.
    await sidebar.getByText('Members', { exact: true }).first().click();
    await sidebar.getByText('Create a member', { exact: false }).first().click();
    await expect
      .poll(async () => page.locator('pre, code').evaluateAll((els) => els.some((e) => /curl/i.test(e.textContent ?? '') && (e.textContent ?? '').includes('ada@example.com'))), { timeout: 15_000 })
      .toBe(true);

    const dir = join(root, '.data/screenshots');
    mkdirSync(dir, { recursive: true });
    await page.screenshot({ path: join(dir, 'docs.png') });
    console.info(`/docs screenshot: ${join(dir, 'docs.png')}`);
    expect(outside).toEqual([]);
    expect(errors).toEqual([]);
    expect(blocked).toEqual([]);
    await page.close();
  }, 120_000);
});
