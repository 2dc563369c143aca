import { mkdirSync, readFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import { join } from 'node:path';
import { chromium, type Browser, type Page } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, inject, it } from 'vitest';
import { apiClient, unique } from '../support/fixtures.js';
import { linkFrom, messagesTo, waitForMessage } from '../support/mailbox.js';

// The pages the links in customer emails open (`/reset-password?token=...` from forgot-password,
// `/verify-email?token=...` from sign-up), in headless Chromium (Debian's `chromium`, driven by
// playwright-core) through the gateway: from the email written under the data directory to the
// account it changed, as the customer goes. Screenshots land in `.data/screenshots/`.

const gatewayUrl = inject('gatewayUrl');
const origin = new URL(gatewayUrl).origin;
const api = apiClient(gatewayUrl);
const dataDir = inject('dataDir');
const CHROMIUM = process.env.CHROMIUM_PATH ?? '/usr/bin/chromium';
const SCREENSHOTS = process.env.SCREENSHOT_DIR ?? join(process.cwd(), '.data', 'screenshots');
const AXE_SOURCE = readFileSync(createRequire(import.meta.url).resolve('axe-core/axe.min.js'), 'utf8');
const PASSWORD = 'correct-horse-42';
const NEW_PASSWORD = 'a brand new passphrase';
/** How long the page may take to show what the assertion waits for (a loaded machine is slow, not wrong). */
const WAIT = { timeout: 20_000 };
const RESET_MAIL = /\/reset-password\?token=/;
const VERIFY_MAIL = /\/verify-email\?token=/;

let browser: Browser;
beforeAll(async () => {
  mkdirSync(SCREENSHOTS, { recursive: true });
  browser = await chromium.launch({ executablePath: CHROMIUM, headless: true, args: ['--no-sandbox', '--disable-gpu', '--disable-background-networking', '--disable-component-update', '--no-first-run'] });
}, 60_000);
afterAll(async () => {
  await browser?.close();
});

async function signUp(): Promise<{ email: string; token: string }> {
  const email = `${unique('links')}@example.com`;
  const res = await api.post('/api/account/signup', { email, password: PASSWORD, firstName: 'Ada', lastName: 'Lovelace', dateOfBirth: '1990-05-17' });
  expect(res.status, JSON.stringify(res.body)).toBe(200);
  return { email, token: res.body.token as string };
}

/** The link of the newest email to `to` that points at `/<page>`, exactly as written in it. */
async function emailedLink(to: string, page: string, pattern: RegExp): Promise<string> {
  const mail = await waitForMessage(dataDir, to, (m) => pattern.test(m.text));
  return linkFrom(mail.text, page);
}

interface SentRequest {
  method: string;
  url: string;
  headers: Promise<Record<string, string>>;
}

/**
 * A page at `width` opened at `url`, collecting every request it sends (with the headers that
 * went on the wire) and its script errors (a CSP violation is one).
 */
async function openPage(url: string, width = 375) {
  const context = await browser.newContext({ viewport: { width, height: width < 600 ? 740 : 900 } });
  const page = await context.newPage();
  const requests: SentRequest[] = [];
  const problems: string[] = [];
  page.on('request', (r) => requests.push({ method: r.method(), url: r.url(), headers: r.allHeaders() }));
  page.on('pageerror', (e) => problems.push(e.message));
  // A refused API call (the 400 of a used link) is logged by Chromium as a failed resource: expected.
  page.on('console', (msg) => msg.type() === 'error' && !msg.text().startsWith('Failed to load resource') && problems.push(msg.text()));
  await page.goto(url);
  return { page, requests, problems, close: () => context.close() };
}

/** Every axe-core violation (any impact) of what the page shows now. */
async function axeViolations(page: Page): Promise<string[]> {
  // Evaluated over the DevTools protocol, not as a page script, so the page's CSP still holds.
  await page.evaluate(`${AXE_SOURCE}\n;0`);
  const result = (await page.evaluate(`axe.run(document, { resultTypes: ['violations'] })`)) as { violations: { id: string; impact: string; nodes: { target: string[] }[] }[] };
  return result.violations.map((v) => `${v.id} (${v.impact}): ${v.nodes.map((n) => n.target.join(' ')).join(', ')}`);
}

const fitsPhone = (page: Page) => page.evaluate(() => (globalThis as any).document.documentElement.scrollWidth <= (globalThis as any).innerWidth);
const activeId = (page: Page) => page.evaluate(() => (globalThis as any).document.activeElement?.id as string | undefined);
const apiCalls = (requests: SentRequest[], path: string) => requests.filter((r) => r.method === 'POST' && new URL(r.url).pathname === path);

/** Every request after the link itself went to the platform's origin, without the token and without a Referer. */
async function expectTokenKeptIn(requests: SentRequest[], token: string) {
  const later = requests.slice(1).filter((r) => !r.url.endsWith('/favicon.ico'));
  expect(later.length).toBeGreaterThan(0);
  for (const r of later) {
    expect(r.url.startsWith(`${origin}/`), r.url).toBe(true);
    expect(r.url).not.toContain(token);
    // Chromium reports a Referer withheld by the policy as empty.
    expect((await r.headers).referer ?? '', `Referer sent with ${r.method} ${r.url}`).toBe('');
  }
}

describe('the links in customer emails open pages', () => {
  it.each([
    ['/reset-password?token=x', 'reset-password'],
    ['/verify-email?token=x', 'verify-email'],
  ])('GET %s answers 200 text/html with the pages’ security headers and only its own script', async (path, name) => {
    const res = await fetch(`${gatewayUrl}${path}`);
    expect(res.status).toBe(200);
    expect(res.headers.get('content-type')).toMatch(/^text\/html/);
    const csp = res.headers.get('content-security-policy') ?? '';
    expect(csp).toContain("default-src 'none'");
    expect(csp).toContain("script-src 'self'");
    expect(csp).toContain("connect-src 'self'");
    expect(csp).toContain("frame-ancestors 'none'");
    expect(csp).not.toContain('unsafe-inline');
    expect(res.headers.get('referrer-policy')).toBe('no-referrer');
    expect(res.headers.get('x-frame-options')).toBe('DENY');
    expect(res.headers.get('x-content-type-options')).toBe('nosniff');
    expect(res.headers.get('cache-control')).toBe('no-store');
    const html = await res.text();
    expect(html).toContain('<meta name="referrer" content="no-referrer">');
    expect(html).not.toMatch(/<script(?![^>]*\bsrc=)[^>]*>/);
    expect(html).toContain(`src="/assets/${name}.js"`);
    const script = await fetch(`${gatewayUrl}/assets/${name}.js`);
    expect(script.status).toBe(200);
    expect(script.headers.get('content-type')).toMatch(/^text\/javascript/);
  });
});

describe('the password-reset page', () => {
  it('sets a new password from the emailed link: it signs in and the old one no longer does; the token leaves the address bar and goes nowhere else', async () => {
    const { email } = await signUp();
    expect((await api.post('/api/account/forgot-password', { email })).status).toBe(202);
    const link = await emailedLink(email, 'reset-password', RESET_MAIL);
    const token = new URL(link).searchParams.get('token')!;
    expect(link).toBe(`${gatewayUrl}/reset-password?token=${encodeURIComponent(token)}`);

    const { page, requests, problems, close } = await openPage(link);
    const violations: string[] = [];
    const newPassword = page.getByLabel(/^New password/);
    const confirmation = page.getByLabel('Confirm new password');
    const setPassword = page.getByRole('button', { name: 'Set new password' });
    await newPassword.waitFor(WAIT);
    expect(page.url()).toBe(`${gatewayUrl}/reset-password`);
    // The token is kept for the tab: a reload still shows the form.
    await page.reload();
    await newPassword.waitFor(WAIT);
    expect(await page.getByRole('heading', { level: 1 }).textContent()).toBe('Choose a new password');
    violations.push(...(await axeViolations(page)));
    expect(await fitsPhone(page)).toBe(true);

    await newPassword.fill('short');
    await confirmation.fill('different');
    await setPassword.click();
    await expect.poll(() => page.locator('#newPassword-error').textContent(), WAIT).toBe('Use at least 8 characters.');
    expect(await page.locator('#confirmPassword-error').textContent()).toBe('The two passwords do not match.');
    expect(await newPassword.getAttribute('aria-invalid')).toBe('true');
    expect(await confirmation.getAttribute('aria-invalid')).toBe('true');
    expect(await page.getByRole('alert').textContent()).toBe('Please correct the 2 highlighted fields.');
    expect(await activeId(page)).toBe('newPassword');
    violations.push(...(await axeViolations(page)));
    await page.screenshot({ path: join(SCREENSHOTS, 'reset-password-375-errors.png'), fullPage: true });

    await newPassword.fill('x'.repeat(129));
    await confirmation.fill('x'.repeat(129));
    await setPassword.click();
    await expect.poll(() => page.locator('#newPassword-error').textContent(), WAIT).toBe('Use at most 128 characters.');
    expect(await page.locator('#confirmPassword-error').textContent()).toBe('');

    await newPassword.fill(NEW_PASSWORD);
    await confirmation.fill(`${NEW_PASSWORD}!`);
    await setPassword.click();
    await expect.poll(() => page.locator('#confirmPassword-error').textContent(), WAIT).toBe('The two passwords do not match.');
    expect(await page.locator('#newPassword-error').textContent()).toBe('');
    expect(apiCalls(requests, '/api/account/reset-password')).toHaveLength(0);

    // By keyboard: new password, Tab to the confirmation, Tab to the button, Enter.
    await confirmation.fill('');
    await newPassword.focus();
    await page.keyboard.press('Tab');
    expect(await activeId(page)).toBe('confirmPassword');
    await page.keyboard.type(NEW_PASSWORD);
    await page.keyboard.press('Tab');
    expect(await activeId(page)).toBe('submit');
    await page.keyboard.press('Enter');
    await expect.poll(() => page.getByRole('heading', { level: 1 }).textContent(), WAIT).toBe('Password changed');
    expect(await page.locator('#notice').textContent()).toBe('Your password has been changed. You can now sign in with your new password.');
    expect(await page.locator('#reset-form').isVisible()).toBe(false);
    expect(await page.getByRole('alert').isVisible()).toBe(false);
    violations.push(...(await axeViolations(page)));
    await page.screenshot({ path: join(SCREENSHOTS, 'reset-password-375-done.png'), fullPage: true });

    expect(apiCalls(requests, '/api/account/reset-password')).toHaveLength(1);
    await expectTokenKeptIn(requests, token);
    expect(page.url()).toBe(`${gatewayUrl}/reset-password`);
    // A reload of the tab says it again, rather than asking for the link it has used.
    await page.reload();
    await expect.poll(() => page.getByRole('heading', { level: 1 }).textContent(), WAIT).toBe('Password changed');
    expect(await page.locator('#notice').textContent()).toBe('Your password has been changed. You can now sign in with your new password.');
    expect(await page.getByRole('alert').isVisible()).toBe(false);
    expect(await page.locator('#request-form').isVisible()).toBe(false);
    expect(apiCalls(requests, '/api/account/reset-password')).toHaveLength(1);
    expect(problems).toEqual([]);
    expect(violations).toEqual([]);
    await close();

    const login = await api.post('/api/account/login', { email, password: NEW_PASSWORD });
    expect(login.status).toBe(200);
    expect(login.body.account.email).toBe(email);
    expect((await api.post('/api/account/login', { email, password: PASSWORD })).status).toBe(401);
  });

  it('the same link again says it is used up and emails a new link on request', async () => {
    const { email } = await signUp();
    expect((await api.post('/api/account/forgot-password', { email })).status).toBe(202);
    const link = await emailedLink(email, 'reset-password', RESET_MAIL);
    const token = new URL(link).searchParams.get('token')!;
    expect((await api.post('/api/account/reset-password', { token, newPassword: NEW_PASSWORD })).status).toBe(204);

    const { page, problems, close } = await openPage(link, 1280);
    await page.getByLabel(/^New password/).fill('another passphrase');
    await page.getByLabel('Confirm new password').fill('another passphrase');
    await page.getByRole('button', { name: 'Set new password' }).click();
    const alert = page.getByRole('alert');
    await expect.poll(() => alert.textContent(), WAIT).toContain('This password reset link has expired or has already been used');
    expect(await alert.textContent()).toContain('You can request a new link below.');
    expect(await page.getByRole('heading', { level: 1 }).textContent()).toBe('Link no longer valid');
    expect(await page.locator('#reset-form').isVisible()).toBe(false);
    expect(await page.getByRole('heading', { level: 2, name: 'Get a new link' }).isVisible()).toBe(true);
    const violations = await axeViolations(page);
    await page.screenshot({ path: join(SCREENSHOTS, 'reset-password-1280-used.png'), fullPage: true });

    await page.getByLabel('Email').fill(email);
    await page.getByRole('button', { name: 'Email me a new link' }).click();
    await expect.poll(() => page.locator('#notice').textContent(), WAIT).toBe(`If an account uses ${email}, we have emailed it a new link to reset the password. It works once, within one hour.`);
    expect(await alert.isVisible()).toBe(false);
    violations.push(...(await axeViolations(page)));
    await expect.poll(async () => (await messagesTo(dataDir, email)).filter((m) => RESET_MAIL.test(m.text)).length, WAIT).toBe(2);
    const fresh = await emailedLink(email, 'reset-password', RESET_MAIL);
    expect(fresh).not.toBe(link);
    expect(problems).toEqual([]);
    expect(violations).toEqual([]);
    await close();

    // The refused attempt changed nothing.
    expect((await api.post('/api/account/login', { email, password: NEW_PASSWORD })).status).toBe(200);
    expect((await api.post('/api/account/login', { email, password: 'another passphrase' })).status).toBe(401);
  });

  it('opened without a token says so and offers a new link', async () => {
    const { page, problems, close } = await openPage(`${gatewayUrl}/reset-password`);
    await expect.poll(() => page.getByRole('alert').textContent(), WAIT).toBe('This page needs the link from your password reset email. Open the whole link from the email, or request a new link below.');
    expect(await page.locator('#reset-form').isVisible()).toBe(false);
    expect(await page.getByLabel('Email').isVisible()).toBe(true);
    await page.getByRole('button', { name: 'Email me a new link' }).click();
    await expect.poll(() => page.locator('#email-error').textContent(), WAIT).toBe('Enter the email address of your account.');
    await page.getByLabel('Email').fill('not an email');
    await page.getByRole('button', { name: 'Email me a new link' }).click();
    await expect.poll(() => page.locator('#email-error').textContent(), WAIT).toBe('Must be a valid email address.');
    expect(await page.getByLabel('Email').getAttribute('aria-invalid')).toBe('true');
    expect(await axeViolations(page)).toEqual([]);
    expect(await fitsPhone(page)).toBe(true);
    expect(problems).toEqual([]);
    await close();
  });
});

describe('the email-verification page', () => {
  it('verifies the email when the link from the sign-up email is opened; the account then shows emailVerified', async () => {
    const { email, token: session } = await signUp();
    const link = await emailedLink(email, 'verify-email', VERIFY_MAIL);
    const token = new URL(link).searchParams.get('token')!;
    expect(link).toBe(`${gatewayUrl}/verify-email?token=${encodeURIComponent(token)}`);
    expect((await api.get('/api/account/me', { token: session })).body.emailVerified).toBe(false);

    const { page, requests, problems, close } = await openPage(link);
    await expect.poll(() => page.getByRole('heading', { level: 1 }).textContent(), WAIT).toBe('Email verified');
    expect(await page.locator('#notice').textContent()).toContain('your email address is confirmed');
    expect(await page.getByRole('alert').isVisible()).toBe(false);
    expect(page.url()).toBe(`${gatewayUrl}/verify-email`);
    const violations = await axeViolations(page);
    expect(await fitsPhone(page)).toBe(true);
    await page.screenshot({ path: join(SCREENSHOTS, 'verify-email-375-done.png'), fullPage: true });
    expect(apiCalls(requests, '/api/account/verify-email')).toHaveLength(1);
    await expectTokenKeptIn(requests, token);
    // A reload says it again (it asked for the link it had just used, probe F), calling nothing.
    await page.reload();
    await expect.poll(() => page.getByRole('heading', { level: 1 }).textContent(), WAIT).toBe('Email verified');
    expect(apiCalls(requests, '/api/account/verify-email')).toHaveLength(1);
    expect(problems).toEqual([]);
    await close();

    const me = await api.get('/api/account/me', { token: session });
    expect(me.status).toBe(200);
    expect(me.body.emailVerified).toBe(true);

    const again = await openPage(link, 1280);
    await expect.poll(() => again.page.getByRole('heading', { level: 1 }).textContent(), WAIT).toBe('Link no longer valid');
    expect(await again.page.getByRole('alert').textContent()).toContain('This confirmation link has expired or has already been used');
    expect(await again.page.getByRole('alert').textContent()).toContain('If you opened it before, your email address is already confirmed');
    violations.push(...(await axeViolations(again.page)));
    await again.page.screenshot({ path: join(SCREENSHOTS, 'verify-email-1280-used.png'), fullPage: true });
    expect(again.problems).toEqual([]);
    expect(violations).toEqual([]);
    await again.close();
  });

  it('opened without a token says so and calls nothing', async () => {
    const { page, requests, problems, close } = await openPage(`${gatewayUrl}/verify-email`);
    await expect.poll(() => page.getByRole('alert').textContent(), WAIT).toBe('This page needs the link from your confirmation email. Open the whole link from the email we sent when you signed up.');
    expect(apiCalls(requests, '/api/account/verify-email')).toHaveLength(0);
    expect(await axeViolations(page)).toEqual([]);
    expect(problems).toEqual([]);
    await close();
  });
});
