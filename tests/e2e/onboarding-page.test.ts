import { mkdirSync, readFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import { join } from 'node:path';
import pg from 'pg';
import { chromium, type Browser, type Page } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, inject, it } from 'vitest';
import { apiClient, unique } from '../support/fixtures.js';
import { emailedToken, fillWizard, invite, setUpOnboardingMerchant, signUpCustomer, type OnboardingMerchant } from '../support/onboarding-fixtures.js';
import { startWebhookReceiver, type WebhookReceiver } from '../support/webhook-receiver.js';
import { webhookFixtures } from '../support/webhook-fixtures.js';

// The onboarding page in headless Chromium (Debian's, driven by playwright-core): from the
// emailed link to a member with a subscription, as an invitee would go.

const gatewayUrl = inject('gatewayUrl');
const api = apiClient(gatewayUrl);
const admin = inject('adminToken');
const dataDir = inject('dataDir');
const CHROMIUM = process.env.CHROMIUM_PATH ?? '/usr/bin/chromium';
const SCREENSHOTS = process.env.SCREENSHOT_DIR ?? join(process.cwd(), '.data', 'screenshots');
const AXE_SOURCE = readFileSync(createRequire(import.meta.url).resolve('axe-core/axe.min.js'), 'utf8');
const CARD_NUMBER = '4242424242424242';
const db = new pg.Client({ connectionString: inject('databaseUrl') });

let browser: Browser;
let receiver: WebhookReceiver;
let m: OnboardingMerchant;
beforeAll(async () => {
  mkdirSync(SCREENSHOTS, { recursive: true });
  await db.connect();
  browser = await chromium.launch({ executablePath: CHROMIUM, headless: true, args: ['--no-sandbox'] });
  receiver = await startWebhookReceiver();
  m = await setUpOnboardingMerchant(api, admin);
}, 60_000);
afterAll(async () => {
  await browser?.close();
  await receiver?.close();
  await db.end();
});

/** A page at `width`, collecting console errors (a CSP violation is one) and request bodies. */
async function openPage(width = 375) {
  const context = await browser.newContext({ viewport: { width, height: width < 600 ? 740 : 900 } });
  const page = await context.newPage();
  const consoleErrors: string[] = [];
  const sentBodies: string[] = [];
  // Resource failures are checked by URL below (the browser's own /favicon.ico probe is a 404).
  page.on('console', (msg) => msg.type() === 'error' && !msg.text().startsWith('Failed to load resource') && consoleErrors.push(msg.text()));
  page.on('response', (res) => res.status() >= 400 && !res.url().endsWith('/favicon.ico') && consoleErrors.push(`${res.status()} ${res.url()}`));
  page.on('request', (req) => sentBodies.push(`${req.url()} ${req.postData() ?? ''}`));
  return { page, consoleErrors, sentBodies, close: () => context.close() };
}

/** Serious and critical axe-core violations of what the page shows now. */
async function axeViolations(page: Page): Promise<string[]> {
  // Evaluated over the DevTools protocol, not as a page script, so the page's CSP still holds.
  await page.evaluate(`${AXE_SOURCE}\n;0`);
  const result = (await page.evaluate(`axe.run(document, { resultTypes: ['violations'] })`)) as { violations: { id: string; impact: string; nodes: { target: string[] }[] }[] };
  return result.violations.filter((v) => v.impact === 'serious' || v.impact === 'critical').map((v) => `${v.id}: ${v.nodes.map((n) => n.target.join(' ')).join(', ')}`);
}

const step = (page: Page, id: string) => page.locator(`#step-${id}`);
const heading = (page: Page, name: string | RegExp) => page.getByRole('heading', { level: 2, name });

async function continueFrom(page: Page, id: string) {
  await step(page, id).getByRole('button', { name: 'Continue' }).click();
}

/** Opens the link and walks to the account step, filled in (the invitation's email already there), not sent. */
async function toFilledAccountStep(page: Page, link: string, email: string, checks: (p: Page) => Promise<void> = async () => {}) {
  await page.goto(link);
  await heading(page, 'Welcome').waitFor();
  await checks(page);
  await step(page, 'welcome').getByRole('button', { name: 'Continue' }).click();
  await heading(page, 'Your account').waitFor();
  expect(await step(page, 'account').getByLabel('Email').inputValue()).toBe(email);
  await step(page, 'account').getByLabel('Password').fill('correct-horse-42');
  await step(page, 'account').getByLabel('Date of birth').fill('1990-05-17');
  await checks(page);
}

/** Walks from the link to the plan step; answers the invitation's email. */
async function toPlanStep(page: Page, link: string, email: string, checks: (p: Page) => Promise<void> = async () => {}) {
  await toFilledAccountStep(page, link, email, checks);
  await continueFrom(page, 'account');
  await heading(page, 'Your details').waitFor();
  expect(await step(page, 'details').getByLabel('First name').inputValue()).toBe('Ada');
  expect(await step(page, 'details').getByLabel('Last name').inputValue()).toBe('Lovelace');
  await step(page, 'details').getByLabel('Phone').fill('+61 400 000 000');
  await checks(page);
  await continueFrom(page, 'details');
  await heading(page, 'Payment method').waitFor();
  await step(page, 'payment').getByLabel('Card number').fill(CARD_NUMBER);
  await step(page, 'payment').getByLabel('Expiry month').fill('12');
  await step(page, 'payment').getByLabel('Expiry year').fill('2030');
  await checks(page);
  await continueFrom(page, 'payment');
  await heading(page, 'Choose a plan').waitFor();
}

async function linkFor(email?: string) {
  const inv = await invite(api, m, email ? { email } : {});
  return { ...inv, link: `${gatewayUrl}/onboard?token=${encodeURIComponent(await emailedToken(dataDir, inv.email))}` };
}

describe('the onboarding page', () => {
  it('takes an invitee from the emailed link to done, with onboarding.completed delivered and verified', async () => {
    const hooks = webhookFixtures(api, receiver, admin);
    const key = await hooks.createKey(m.id);
    const path = `/onboarding-page/${unique()}`;
    await hooks.configure(m.id, key, path);
    await hooks.settle(m.id, await hooks.createKey(m.id));

    const { link, email, invitationId } = await linkFor();
    const response = await fetch(link);
    const csp = response.headers.get('content-security-policy') ?? '';
    expect(csp).toContain("script-src 'self'");
    expect(csp).not.toContain('unsafe-inline');
    expect(await response.text()).not.toMatch(/<script(?![^>]*\bsrc=)[^>]*>/);

    const { page, consoleErrors, sentBodies, close } = await openPage(375);
    const violations: string[] = [];
    await toPlanStep(page, link, email, async (p) => void violations.push(...(await axeViolations(p))));
    await step(page, 'plan').getByLabel(/Monthly/).check();
    await continueFrom(page, 'plan');
    await heading(page, 'A few questions').waitFor();
    violations.push(...(await axeViolations(page)));
    await step(page, 'questions').getByLabel(/Why do you join/).fill('Fitness');
    await step(page, 'questions').getByLabel('M', { exact: true }).check();
    await step(page, 'questions').getByLabel('Running').check();
    await continueFrom(page, 'questions');
    await heading(page, 'Review').waitFor();
    await step(page, 'review').filter({ hasText: 'Visa ending 4242' }).waitFor();
    violations.push(...(await axeViolations(page)));
    await page.screenshot({ path: join(SCREENSHOTS, 'onboarding-review-375.png'), fullPage: true });
    await step(page, 'review').getByRole('button', { name: 'Complete' }).click();
    await heading(page, "You're all set").waitFor();
    violations.push(...(await axeViolations(page)));
    await page.screenshot({ path: join(SCREENSHOTS, 'onboarding-done-375.png'), fullPage: true });
    // Done: the tab keeps no customer token for a later user of the browser to find (a reload or a
    // reopened tab); a reload says the invitation is complete.
    expect(await page.evaluate(() => Object.values((globalThis as any).sessionStorage as Record<string, string>).filter((v) => v.startsWith('eyJ')))).toEqual([]);
    await page.reload();
    await page.getByText('This invitation has already been completed').waitFor();

    expect(violations).toEqual([]);
    expect(consoleErrors).toEqual([]);
    expect(sentBodies.join('\n')).not.toContain(CARD_NUMBER);
    const invitation = await api.get(`/api/Invitations/${invitationId}`, { token: m.key });
    expect(invitation.body.status).toBe('Completed');
    const sub = await api.get(`/api/Subscriptions/${invitation.body.subscriptionId}`, { token: m.key });
    expect(sub.body.status).toBe('Active');
    const hooksReceived = await receiver.waitFor(path, (reqs) => reqs.some((r) => r.payload?.type === 'onboarding.completed' && r.payload.data.invitationId === invitationId));
    const event = hooksReceived.find((r) => r.payload?.type === 'onboarding.completed')!;
    expect(event.verified).toBe(true);
    expect(event.payload.data).toMatchObject({ invitationId, subscriptionId: invitation.body.subscriptionId, email });
    await close();
  });

  it('resumes at the saved step after a reload', async () => {
    const { link, email } = await linkFor();
    const { page, close } = await openPage(1280);
    await toPlanStep(page, link, email);
    // The invitation's token is out of the address bar and the history (probe H); the reload resumes all the same.
    expect(page.url()).not.toContain('token=');
    expect(new URL(page.url()).pathname).toBe('/onboard');
    await page.reload();
    await heading(page, 'Choose a plan').waitFor();
    await step(page, 'plan').getByRole('button', { name: 'Back' }).click();
    await heading(page, 'Payment method').waitFor();
    await step(page, 'payment').filter({ hasText: 'Visa ending 4242' }).waitFor();
    await page.screenshot({ path: join(SCREENSHOTS, 'onboarding-payment-desktop.png'), fullPage: true });
    expect(await axeViolations(page)).toEqual([]);
    await close();
  });

  it("moves between the wizard's steps with the browser's Back and Forward, never leaving the wizard", async () => {
    const { link, email } = await linkFor();
    const { page, consoleErrors, close } = await openPage(1280);
    await toPlanStep(page, link, email);
    await page.goBack();
    await heading(page, 'Payment method').waitFor();
    await step(page, 'payment').filter({ hasText: 'Visa ending 4242' }).waitFor();
    await page.goBack();
    await heading(page, 'Your details').waitFor();
    expect(await step(page, 'details').getByLabel('Phone').inputValue()).toBe('+61 400 000 000');
    expect(new URL(page.url()).pathname).toBe('/onboard');
    await page.goForward();
    await heading(page, 'Payment method').waitFor();
    await page.goForward();
    await heading(page, 'Choose a plan').waitFor();
    // The wizard's own Back and the browser's agree: one step each.
    await step(page, 'plan').getByRole('button', { name: 'Back' }).click();
    await heading(page, 'Payment method').waitFor();
    await page.goBack();
    await heading(page, 'Choose a plan').waitFor();
    expect(await step(page, 'payment').isHidden()).toBe(true);
    expect(consoleErrors).toEqual([]);
    await close();
  });

  it('shows a missing required answer at its question, announced, when completing', async () => {
    const { email, invitationId, link } = await linkFor();
    const customer = await signUpCustomer(api, email);
    const token = new URL(link).searchParams.get('token')!;
    expect((await api.post('/api/onboard/accept', { token }, { token: customer.token })).status).toBe(200);
    await fillWizard(api, customer.token, invitationId, m);

    const { page, close } = await openPage(375);
    await page.goto(link);
    await heading(page, 'Welcome').waitFor();
    await step(page, 'welcome').getByRole('button', { name: 'Continue' }).click();
    await step(page, 'account').getByLabel('Password').fill('correct-horse-42');
    await continueFrom(page, 'account');
    await heading(page, 'Review').waitFor();
    // The answers change elsewhere (another tab) while this page shows Review: a required one is dropped.
    const answers = [{ questionId: m.questions.single.id, optionIds: [m.questions.single.options[0]!.id] }];
    expect((await api.patch('/api/onboard/answers', { invitationId, answers }, { token: customer.token })).status).toBe(204);
    await step(page, 'review').getByRole('button', { name: 'Complete' }).click();
    await heading(page, 'A few questions').waitFor();
    const question = step(page, 'questions').getByLabel(/Why do you join/);
    expect(await question.getAttribute('aria-invalid')).toBe('true');
    expect(await question.evaluate((el) => el === (el.ownerDocument as { activeElement: unknown }).activeElement)).toBe(true);
    await page.locator(`#q-${m.questions.text.id}-error`).filter({ hasText: 'requires an answer' }).waitFor();
    await page.getByRole('alert').filter({ hasText: 'highlighted field' }).waitFor();
    expect(await axeViolations(page)).toEqual([]);
    await close();
  });

  it('can be completed with the keyboard alone', async () => {
    const { link, email } = await linkFor();
    const { page, close } = await openPage(375);
    await page.goto(link);
    await heading(page, 'Welcome').waitFor();
    /** Tabs forward until the focused element has this accessible name, then returns. */
    const tabTo = async (name: RegExp) => {
      for (let i = 0; i < 40; i++) {
        await page.keyboard.press('Tab');
        const label = (await page.evaluate(`(() => {
          const el = document.activeElement;
          if (!el) return '';
          const byFor = el.id ? document.querySelector('label[for="' + el.id + '"]')?.textContent : '';
          return ((byFor ?? '') + ' ' + (el.getAttribute('aria-label') ?? '') + ' ' + (el.tagName === 'BUTTON' ? el.textContent : '')).trim();
        })()`)) as string;
        if (name.test(label)) return;
      }
      throw new Error(`never reached ${name} with Tab`);
    };
    await tabTo(/^Continue$/);
    await page.keyboard.press('Enter');
    await heading(page, 'Your account').waitFor();
    await tabTo(/^Password/);
    await page.keyboard.type('correct-horse-42');
    await tabTo(/^Date of birth/);
    await page.keyboard.type('05171990');
    await tabTo(/^Continue$/);
    await page.keyboard.press('Enter');
    await heading(page, 'Your details').waitFor();
    expect(await page.evaluate('document.activeElement?.textContent')).toBe('Your details');
    await tabTo(/^Continue$/);
    await page.keyboard.press('Enter');
    await heading(page, 'Payment method').waitFor();
    await tabTo(/^Card number/);
    await page.keyboard.type(CARD_NUMBER);
    await tabTo(/^Expiry month/);
    await page.keyboard.type('11');
    await tabTo(/^Expiry year/);
    await page.keyboard.type('2031');
    await tabTo(/^Continue$/);
    await page.keyboard.press('Enter');
    await heading(page, 'Choose a plan').waitFor();
    await tabTo(/Monthly/);
    await page.keyboard.press('Space');
    await tabTo(/^Continue$/);
    await page.keyboard.press('Enter');
    await heading(page, 'A few questions').waitFor();
    await tabTo(/Why do you join/);
    await page.keyboard.type('Keyboard only');
    await tabTo(/^S$/);
    await page.keyboard.press('ArrowDown');
    await tabTo(/^Continue$/);
    await page.keyboard.press('Enter');
    await heading(page, 'Review').waitFor();
    await tabTo(/^Complete$/);
    await page.keyboard.press('Enter');
    await heading(page, "You're all set").waitFor();
    expect(email).toBeTruthy();
    await close();
  });

  it('signs up once when Continue is pressed twice, and shows the next step without an error', async () => {
    const { link, email } = await linkFor();
    const { page, sentBodies, close } = await openPage(375);
    await toFilledAccountStep(page, link, email);
    await step(page, 'account').getByLabel('Password').press('Enter');
    await step(page, 'account').getByLabel('Password').press('Enter');
    await heading(page, 'Your details').waitFor();
    await page.waitForLoadState('networkidle');
    expect(sentBodies.filter((b) => b.includes('/api/account/signup'))).toHaveLength(1);
    expect(await page.locator('#alert').isVisible()).toBe(false);
    await close();
  });

  it('a session that ends mid-wizard says so and asks to sign in again, then resumes', async () => {
    const { link, email } = await linkFor();
    const { page, sentBodies, close } = await openPage(375);
    await toFilledAccountStep(page, link, email);
    await continueFrom(page, 'account');
    await heading(page, 'Your details').waitFor();
    // The customer token has expired by the time the invitee continues.
    await page.route('**/api/onboard/**', (route) => route.continue({ headers: { ...route.request().headers(), authorization: 'Bearer expired' } }));
    await continueFrom(page, 'details');
    await heading(page, 'Your account').waitFor();
    await page.getByRole('alert').filter({ hasText: 'session has ended' }).waitFor();
    expect(await step(page, 'account').getByLabel('First name').isVisible()).toBe(false);
    expect(await axeViolations(page)).toEqual([]);
    await page.unroute('**/api/onboard/**');
    await step(page, 'account').getByLabel('Password').fill('correct-horse-42');
    await continueFrom(page, 'account');
    await heading(page, 'Your details').waitFor();
    expect(sentBodies.filter((b) => b.includes('/api/account/signup'))).toHaveLength(1);
    expect(sentBodies.filter((b) => b.includes('/api/account/login') && b.includes(email))).toHaveLength(1);
    await close();
  });

  it('says a plan not chosen beside the plans, with focus on the first plan', async () => {
    const { link, email } = await linkFor();
    const { page, close } = await openPage(375);
    await toPlanStep(page, link, email);
    await continueFrom(page, 'plan');
    await page.getByRole('alert').filter({ hasText: 'highlighted field' }).waitFor();
    const first = step(page, 'plan').getByRole('radio').first();
    expect(await first.evaluate((el) => el === (el.ownerDocument as { activeElement: unknown }).activeElement)).toBe(true);
    const describedBy = (await first.getAttribute('aria-describedby'))!;
    expect(await page.locator(`#${describedBy}`).textContent()).toBe('Choose a plan.');
    expect(await axeViolations(page)).toEqual([]);
    await close();
  });

  it('shows a clear message for a revoked invitation and for an expired one', async () => {
    const { link, invitationId } = await linkFor();
    expect((await api.del(`/api/Invitations/${invitationId}`, { token: m.key })).status).toBe(204);
    const { page, close } = await openPage(375);
    await page.goto(link);
    await page.getByRole('alert').filter({ hasText: 'withdrawn' }).waitFor();
    expect(await axeViolations(page)).toEqual([]);
    const expired = await linkFor();
    await db.query(`update checkout.invitations set expires_at = now() - interval '1 minute' where id = $1`, [expired.invitationId]);
    await page.goto(expired.link);
    await page.getByRole('alert').filter({ hasText: 'has expired' }).waitFor();
    await page.goto(`${gatewayUrl}/onboard?token=unknown`);
    await page.getByRole('alert').filter({ hasText: 'could not find this invitation' }).waitFor();
    await close();
  });
});
