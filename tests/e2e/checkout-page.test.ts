import { mkdirSync, readFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import { join, resolve } from 'node:path';
import { chromium, type Browser, type BrowserContext, type Page } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, inject, it } from 'vitest';
import { captureBank, complete, linkPayload, setUpCheckoutMerchant, signLink, type CheckoutMerchant } from '../support/checkout-fixtures.js';
import { adminToken } from '../support/e2e.js';
import { apiClient, unique } from '../support/fixtures.js';
import { webhookFixtures } from '../support/webhook-fixtures.js';
import { startWebhookReceiver, type WebhookReceiver } from '../support/webhook-receiver.js';

/**
 * The hosted checkout page in headless Chromium (Debian's `chromium`, driven by playwright-core)
 * through the gateway, as a customer uses it: subscribing to the return URL with a verified
 * webhook, field errors, a lost connection and a provider outage, expired and completed links,
 * the keyboard alone, and axe-core. Screenshots land in `.data/screenshots/` (ignored by git).
 */
const CHROMIUM = process.env.CHROMIUM_PATH ?? '/usr/bin/chromium';
const root = resolve(import.meta.dirname, '../..');
const shots = join(root, '.data', 'screenshots');
const gatewayUrl = inject('gatewayUrl');
const sandboxUrl = inject('sandboxProviderUrl');
const api = apiClient(gatewayUrl);
const admin = adminToken();
const AXE_SOURCE = readFileSync(createRequire(import.meta.url).resolve('axe-core/axe.min.js'), 'utf8');
const PHONE = { width: 375, height: 812 };
const DESKTOP = { width: 1280, height: 900 };
/** How long the page may take to show what the assertion waits for (a loaded machine is slow, not wrong). */
const WAIT = { timeout: 20_000 };

let browser: Browser;
let receiver: WebhookReceiver;
let m: CheckoutMerchant;
const RETURN_PATH = '/shop/thanks';

beforeAll(async () => {
  browser = await chromium.launch({
    executablePath: CHROMIUM,
    args: ['--headless', '--no-sandbox', '--disable-gpu', '--disable-background-networking', '--disable-component-update', '--disable-sync', '--no-first-run'],
  });
  mkdirSync(shots, { recursive: true });
  receiver = await startWebhookReceiver();
  receiver.respond(RETURN_PATH, () => ({ status: 200, headers: { 'content-type': 'text/html; charset=utf-8' }, body: '<!doctype html><title>Thanks</title><h1>Thanks for subscribing</h1>' }));
  m = await setUpCheckoutMerchant(api, admin);
  const put = await api.put(`/api/ApiKeys/${m.keyId}/webhook`, { id: m.keyId, merchantId: m.id, webhookUrl: receiver.url('/hooks'), webhookEvents: ['checkout.completed'], webhookEnabled: true }, { token: m.key });
  expect(put.status, JSON.stringify(put.body)).toBe(200);
  receiver.secret('/hooks', m.signingSecret);
  const fx = webhookFixtures(api, receiver, admin);
  await fx.settle(m.id, await fx.createKey(m.id));
}, 120_000);

afterAll(async () => {
  await fetch(`${sandboxUrl}/__sandbox/faults`, { method: 'DELETE' });
  await browser?.close();
  await receiver?.close();
});

/** A link made by the API (as a merchant would), prefilled with the customer's name. */
async function newLink(customer: Record<string, unknown> = { firstName: 'Grace', lastName: 'Hopper' }): Promise<string> {
  const res = await api.post('/api/Checkout/links', { merchantId: m.id, planId: m.planId, returnUrl: receiver.url(RETURN_PATH), customer }, { token: m.key });
  expect(res.status, JSON.stringify(res.body)).toBe(201);
  return res.body.url;
}

interface Opened {
  page: Page;
  context: BrowserContext;
  outside: string[];
  errors: string[];
  requests: string[];
}

async function open(url: string, viewport = PHONE): Promise<Opened> {
  const context = await browser.newContext({ viewport });
  const page = await context.newPage();
  const origin = new URL(gatewayUrl).origin;
  const returnOrigin = new URL(receiver.url('/')).origin;
  const outside: string[] = [];
  const errors: string[] = [];
  const requests: string[] = [];
  page.on('request', (r) => {
    const u = r.url();
    requests.push(`${r.method()} ${u}`);
    if (!u.startsWith(origin) && !u.startsWith(returnOrigin) && !u.startsWith('data:')) outside.push(u);
  });
  page.on('pageerror', (e) => errors.push(e.message));
  page.on('console', (msg) => {
    if (msg.type() === 'error' && !/Failed to load resource/.test(msg.text())) errors.push(msg.text());
  });
  await page.goto(url);
  return { page, context, outside, errors, requests };
}

async function fillForm(page: Page, values: Record<string, string>) {
  for (const [label, value] of Object.entries(values)) await page.getByLabel(label, { exact: false }).fill(value);
}

const subscribe = (page: Page) => page.getByRole('button', { name: /^Subscribe/ });

/** axe-core in the page (evaluated over the DevTools protocol, so the page's CSP still holds). */
async function seriousViolations(page: Page) {
  await page.evaluate(AXE_SOURCE);
  const result = await page.evaluate(async () => (globalThis as any).axe.run((globalThis as any).document, { resultTypes: ['violations'] }));
  return (result.violations as { id: string; impact: string; nodes: { target: string[] }[] }[])
    .filter((v) => v.impact === 'serious' || v.impact === 'critical')
    .map((v) => `${v.id} (${v.impact}): ${v.nodes.map((n) => n.target.join(' ')).join(', ')}`);
}

describe('hosted checkout page', () => {
  it('subscribes and returns to the return URL; the merchant gets one verified checkout.completed; a double click submits once', async () => {
    const email = `${unique('page')}@example.com`;
    const { page, context, outside, errors, requests } = await open(await newLink());
    const response = await page.request.get(page.url());
    const csp = response.headers()['content-security-policy'];
    expect(csp).toContain("script-src 'self'");
    expect(csp).not.toContain('unsafe-inline');
    await expect.poll(() => page.getByRole('heading', { level: 1 }).textContent(), WAIT).toBe('Subscribe to Monthly');
    expect(await page.locator('#merchant').textContent()).toMatch(/^Subscribing with Merchant /);
    expect(await page.title()).toMatch(/^Subscribe to Monthly with Merchant /);
    expect(await page.locator('#plan-price').textContent()).toMatch(/19\.95 per month/);
    expect(await page.getByLabel('First name').inputValue()).toBe('Grace');
    // The link is out of the address bar and the history (anyone who found it there could open
    // the session again and read what the customer typed), and a reload still works (probe H).
    expect(new URL(page.url()).search).toBe('');
    await page.reload();
    await expect.poll(() => page.getByRole('heading', { level: 1 }).textContent(), WAIT).toBe('Subscribe to Monthly');
    expect(await page.getByLabel('First name').inputValue()).toBe('Grace');
    await page.screenshot({ path: join(shots, 'checkout-phone-form.png'), fullPage: true });
    await fillForm(page, { Email: email, 'Account name': 'Grace Hopper', BSB: '062-000', 'Account number': '12345678' });
    await subscribe(page).dblclick();
    await page.waitForURL(receiver.url(RETURN_PATH), { timeout: 30_000 });
    expect(await page.locator('h1').textContent()).toBe('Thanks for subscribing');
    expect(requests.filter((r) => r.includes('/me/capture-bank'))).toHaveLength(1);
    expect(requests.filter((r) => r.includes('/me/complete'))).toHaveLength(1);
    expect(outside).toEqual([]);
    expect(errors).toEqual([]);

    const [hook] = await receiver.waitFor('/hooks', (r) => r.some((x) => x.payload?.data?.email === email));
    const delivered = receiver.received('/hooks').filter((x) => x.payload?.data?.email === email);
    expect(delivered[0]!.verified).toBe(true);
    expect(delivered[0]!.payload).toMatchObject({ type: 'checkout.completed', merchantId: m.id, data: { planId: m.planId, subscriptionId: expect.any(String) } });
    void hook;
    const subs = await api.get(`/api/Subscriptions?merchantId=${m.id}&memberId=${delivered[0]!.payload.data.memberId}`, { token: m.key });
    expect(subs.body.items.map((s: any) => s.id)).toEqual([delivered[0]!.payload.data.subscriptionId]);
    await new Promise((r) => setTimeout(r, 1000));
    expect(receiver.received('/hooks').filter((x) => x.payload?.data?.email === email)).toHaveLength(1);
    await context.close();
  });

  it('shows field errors from the problem beside their fields, announced, and submits nothing more', async () => {
    const { page, context } = await open(await newLink(), DESKTOP);
    await subscribe(page).waitFor();
    await fillForm(page, { Email: 'not-an-email', 'First name': '', 'Account name': 'Grace Hopper', BSB: '12', 'Account number': '12' });
    await subscribe(page).click();
    await expect.poll(() => page.locator('#bsb-error').textContent(), WAIT).toContain('6 digits');
    expect(await page.locator('#email-error').textContent()).not.toBe('');
    expect(await page.locator('#firstName-error').textContent()).toBe('Required.');
    expect(await page.locator('#accountNumber-error').textContent()).toContain('5 to 9 digits');
    expect(await page.getByLabel('BSB').getAttribute('aria-invalid')).toBe('true');
    expect(await page.getByLabel('BSB').getAttribute('aria-describedby')).toBe('bsb-error');
    expect(await page.locator('#alert').getAttribute('role')).toBe('alert');
    expect(await page.locator('#alert').textContent()).toMatch(/Please correct the \d+ highlighted fields/);
    expect(await page.evaluate(() => (globalThis as any).document.activeElement?.id)).toBe('email');
    expect(await page.locator('#accountNumber-error').textContent()).not.toContain('12');
    await page.screenshot({ path: join(shots, 'checkout-desktop-errors.png'), fullPage: true });
    expect(await seriousViolations(page)).toEqual([]);
    expect(new URL(page.url()).pathname).toBe('/checkout');
    await context.close();
  });

  it('a lost connection and a provider outage say what happened; Subscribe works again afterwards', async () => {
    const email = `${unique('retry')}@example.com`;
    const { page, context } = await open(await newLink());
    await subscribe(page).waitFor();
    await fillForm(page, { Email: email, 'Account name': 'Grace Hopper', BSB: '062000', 'Account number': '87654321' });
    await context.setOffline(true);
    await subscribe(page).click();
    await expect.poll(() => page.locator('#alert').textContent(), WAIT).toContain('connection may have dropped');
    await context.setOffline(false);
    await fetch(`${sandboxUrl}/__sandbox/faults`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ down: true, account: m.id }) });
    try {
      await subscribe(page).click();
      await expect.poll(() => page.locator('#alert').textContent(), WAIT).toContain('payment provider is not responding');
      await page.screenshot({ path: join(shots, 'checkout-phone-provider-down.png'), fullPage: true });
    } finally {
      await fetch(`${sandboxUrl}/__sandbox/faults?account=${m.id}`, { method: 'DELETE' });
    }
    await subscribe(page).click();
    await page.waitForURL(receiver.url(RETURN_PATH), { timeout: 30_000 });
    await context.close();
  });

  it('pressed again after the completion answer was lost, or in a second tab after the first completed, goes to the return URL; one subscription', async () => {
    const email = `${unique('again')}@example.com`;
    const url = await newLink({ firstName: 'Grace', lastName: 'Hopper', email });
    const tabs = [await open(url), await open(url)];
    for (const { page } of tabs) {
      await subscribe(page).waitFor();
      await fillForm(page, { 'Account name': 'Grace Hopper', BSB: '062-000', 'Account number': '12345678' });
    }
    const [first, second] = tabs as [Opened, Opened];
    // The service completes the session, but its answer never reaches the page.
    let completions = 0;
    await first.page.route('**/api/Checkout/sessions/me/complete', async (route) => {
      completions++;
      expect((await route.fetch()).status()).toBe(200);
      await route.abort('connectionreset');
    });
    await subscribe(first.page).click();
    await expect.poll(() => first.page.locator('#alert').textContent(), WAIT).toContain('connection may have dropped');
    expect(completions).toBe(1);
    await subscribe(first.page).click();
    await first.page.waitForURL(receiver.url(RETURN_PATH), { timeout: 30_000 });
    await subscribe(second.page).click();
    await second.page.waitForURL(receiver.url(RETURN_PATH), { timeout: 30_000 });
    expect(completions).toBe(1);
    const members = await api.get(`/api/Members?merchantId=${m.id}&email=${encodeURIComponent(email)}`, { token: m.key });
    const subs = await api.get(`/api/Subscriptions?merchantId=${m.id}&memberId=${members.body.items[0].id}`, { token: m.key });
    expect(subs.body.totalCount).toBe(1);
    for (const { context } of tabs) await context.close();
  });

  it('a session that ends mid-form because its link can no longer renew it says so and shows no form', async () => {
    const { page, context } = await open(await newLink());
    await subscribe(page).waitFor();
    await fillForm(page, { Email: `${unique('ended')}@example.com`, 'Account name': 'Grace Hopper', BSB: '062-000', 'Account number': '12345678' });
    // Later: the session's token has expired, and the link, past its expiry, opens no session again.
    const expired = signLink(m.signingSecret, linkPayload(m, { exp: Math.floor(Date.now() / 1000) - 60 }));
    await page.route('**/api/Checkout/sessions/me/**', (route) => route.continue({ headers: { ...route.request().headers(), authorization: 'Bearer expired' } }));
    await page.route('**/api/Checkout/sessions/resolve', (route) => route.continue({ postData: JSON.stringify(expired) }));
    await subscribe(page).click();
    await expect.poll(() => page.locator('#alert').textContent(), WAIT).toContain('link has expired');
    expect(await page.locator('#alert').textContent()).toContain('nothing has been charged');
    expect(await page.locator('form').isVisible()).toBe(false);
    expect(await seriousViolations(page)).toEqual([]);
    await context.close();
  });

  it('an expired link shows a message and no form', async () => {
    const link = signLink(m.signingSecret, linkPayload(m, { exp: Math.floor(Date.now() / 1000) - 60 }));
    const { page, context } = await open(`${gatewayUrl}/checkout?d=${link.d}&s=${link.s}`);
    await expect.poll(() => page.locator('#alert').textContent(), WAIT).toContain('expired');
    expect(await page.locator('form').isVisible()).toBe(false);
    // The tab's title says so too (it stayed "Checkout" in every state).
    expect(await page.title()).toBe('Checkout unavailable – Checkout');
    expect(await page.getByRole('button', { name: /^Subscribe/ }).count()).toBe(0);
    await page.screenshot({ path: join(shots, 'checkout-phone-expired.png'), fullPage: true });
    expect(await seriousViolations(page)).toEqual([]);
    await context.close();
  });

  it('invalid and replayed links show a message and no form', async () => {
    const { page, context } = await open(`${gatewayUrl}/checkout?d=abc&s=def`);
    await expect.poll(() => page.locator('#alert').textContent(), WAIT).toContain('not valid');
    expect(await page.locator('form').isVisible()).toBe(false);
    const used = linkPayload(m);
    const first = signLink(m.signingSecret, used);
    expect((await api.post('/api/Checkout/sessions/resolve', first)).status).toBe(200);
    const reused = signLink(m.signingSecret, { ...used, returnUrl: 'https://shop.example/elsewhere' });
    await page.goto(`${gatewayUrl}/checkout?d=${reused.d}&s=${reused.s}`);
    await expect.poll(() => page.locator('#alert').textContent(), WAIT).toContain('already been used');
    expect(await page.locator('form').isVisible()).toBe(false);
    await context.close();
  });

  it('a busy service (429) is not called an invalid link', async () => {
    const context = await browser.newContext({ viewport: PHONE });
    const page = await context.newPage();
    await page.route('**/api/Checkout/sessions/resolve', (route) =>
      route.fulfill({ status: 429, headers: { 'retry-after': '30' }, contentType: 'application/problem+json', body: JSON.stringify({ type: 'about:blank', title: 'Too many requests.', status: 429 }) }),
    );
    await page.goto(await newLink());
    await expect.poll(() => page.locator('#alert').textContent(), WAIT).toContain('Too many attempts');
    expect(await page.locator('#alert').textContent()).toContain('about 30 seconds');
    expect(await page.locator('#alert').textContent()).not.toContain('not valid');
    await context.close();
  });

  it('an already completed session says so and shows no form', async () => {
    const payload = linkPayload(m, { returnUrl: receiver.url(RETURN_PATH) });
    const link = signLink(m.signingSecret, payload);
    const resolved = await api.post('/api/Checkout/sessions/resolve', link);
    const session = { sessionId: resolved.body.sessionId, token: resolved.body.sessionToken };
    expect((await complete(api, session, await captureBank(api, session))).status).toBe(200);
    const { page, context } = await open(`${gatewayUrl}/checkout?d=${link.d}&s=${link.s}`, DESKTOP);
    await expect.poll(() => page.locator('#notice').textContent(), WAIT).toContain('already complete');
    expect(await page.locator('form').isVisible()).toBe(false);
    expect(await page.title()).toMatch(/^Already subscribed – Subscribe to Monthly with Merchant /);
    await page.screenshot({ path: join(shots, 'checkout-desktop-completed.png'), fullPage: true });
    await context.close();
  });

  it('completes with the keyboard alone, in a sensible tab order', async () => {
    const email = `${unique('keys')}@example.com`;
    const { page, context } = await open(await newLink({}));
    await subscribe(page).waitFor();
    const order = ['email', 'firstName', 'lastName', 'phone', 'accountName', 'bsb', 'accountNumber', 'submit'];
    const values: Record<string, string> = { email, firstName: 'Key', lastName: 'Board', phone: '', accountName: 'Key Board', bsb: '062-000', accountNumber: '11223344' };
    for (const id of order) {
      await page.keyboard.press('Tab');
      expect(await page.evaluate(() => (globalThis as any).document.activeElement?.id)).toBe(id);
      if (values[id]) await page.keyboard.type(values[id]!);
    }
    await page.keyboard.press('Enter');
    await page.waitForURL(receiver.url(RETURN_PATH), { timeout: 30_000 });
    await receiver.waitFor('/hooks', (r) => r.some((x) => x.payload?.data?.email === email));
    await context.close();
  });

  it('has no serious or critical axe-core violations on a phone and on a desktop, and no horizontal scrolling at 375 px', async () => {
    for (const viewport of [PHONE, DESKTOP]) {
      const { page, context } = await open(await newLink(), viewport);
      await subscribe(page).waitFor();
      expect(await seriousViolations(page)).toEqual([]);
      expect(await page.evaluate(() => (globalThis as any).document.documentElement.scrollWidth <= (globalThis as any).innerWidth)).toBe(true);
      await page.screenshot({ path: join(shots, `checkout-${viewport === PHONE ? 'phone' : 'desktop'}-axe.png`), fullPage: true });
      await context.close();
    }
  });
});

