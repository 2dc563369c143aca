import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { setUpMerchant, type TestMerchant } from '../support/billing-fixtures.js';
import { apiClient, eventually, unique, type ApiClient } from '../support/fixtures.js';
import { startTestPlatform, type TestPlatform } from '../support/platform.js';
import { startFakeSmtpServer, type FakeSmtpServer } from '../support/smtp-server.js';

// Email by SMTP to a mail server that refuses recipients the way real ones do, quoting the
// address in its reply (`550 5.1.1 <addr>: Recipient address rejected`). Regressions: the
// address reached the logs through the mail library's error text; an invitation whose email
// was refused answered 500 and left the invitation and an unclaimed account behind, so a retry
// made a second one.

const SMTP_PASSWORD = 'smtp-secret-pw';
let smtp: FakeSmtpServer;
let platform: TestPlatform;
let api: ApiClient;
let m: TestMerchant;
let db: pg.Client;
const logs: { service: string; line: string }[] = [];
/** Addresses the fake server refuses; a test removes one to let its retry through. */
const refused = new Set<string>();

beforeAll(async () => {
  smtp = await startFakeSmtpServer((address) => refused.has(address.toLowerCase()));
  platform = await startTestPlatform({
    services: ['identity', 'billing', 'checkout', 'gateway'],
    env: { EMAIL_PROVIDER: 'smtp', EMAIL_SMTP_URL: smtp.url.replace('smtp://', `smtp://user:${SMTP_PASSWORD}@`) },
    logLevel: 'info',
    onLog: (service, line) => logs.push({ service, line }),
  });
  api = apiClient(platform.gatewayUrl!);
  m = await setUpMerchant(api, platform.adminToken);
  db = new pg.Client({ connectionString: platform.databaseUrl });
  await db.connect();
}, 120_000);
afterAll(async () => {
  await db?.end();
  await platform?.stop();
  await smtp?.close();
});

/** An address the mail server refuses. */
function refusedAddress(prefix: string): string {
  const email = `${unique(prefix)}@refused.example`;
  refused.add(email.toLowerCase());
  return email;
}

/** Every line of service output naming the address (or its local part, or the SMTP password). */
const leaks = (email: string) => logs.filter(({ line }) => [email.toLowerCase(), email.split('@')[0]!.toLowerCase(), SMTP_PASSWORD].some((s) => line.toLowerCase().includes(s)));

/** The parsed log line of `service` whose msg is `msg`, once it has been written (undefined if it never is). */
const logged = (service: string, msg: string, after = 0) =>
  eventually(async () => {
    const lines = logs.slice(after).filter((l) => l.service === service);
    return lines.map(({ line }) => parsed(line)).find((l) => l?.msg === msg);
  }, 10_000);

function parsed(line: string): Record<string, any> | undefined {
  try {
    return JSON.parse(line.slice(line.indexOf('{'))) as Record<string, any>;
  } catch {
    return undefined;
  }
}

const accountsOf = async (email: string) => Number((await db.query('select count(*) from identity.customer_accounts where lower(email) = lower($1)', [email])).rows[0].count);
const invitationsOf = async (email: string) => Number((await db.query('select count(*) from checkout.invitations where lower(email) = lower($1)', [email])).rows[0].count);

describe('an email the mail server refuses', () => {
  it('still signs the customer up (200) and logs the failure with its traceId, without the address', async () => {
    const email = refusedAddress('signup');
    const from = logs.length;
    const res = await api.post('/api/account/signup', { email, password: 'correct-horse-42', firstName: 'Ada', lastName: 'Lovelace', dateOfBirth: '1990-05-17' });
    expect(res.status).toBe(200);
    const line = (await logged('identity', 'could not send the verification email', from))!;
    expect(line, logs.slice(from).map((l) => l.line).join('\n')).toBeDefined();
    expect(leaks(email)).toEqual([]);
    expect(line.level).toBe(50);
    expect(line.traceId).toMatch(/^[0-9a-f]{32}$/);
    expect(line.delivery).toMatchObject({ sender: 'smtp', responseCode: 550 });
    expect(leaks(email)).toEqual([]);
  });

  it('still answers forgot-password 202 and logs the failure without the address', async () => {
    const email = refusedAddress('reset');
    refused.delete(email.toLowerCase());
    expect((await api.post('/api/account/signup', { email, password: 'correct-horse-42', firstName: 'Ada', lastName: 'Lovelace', dateOfBirth: '1990-05-17' })).status).toBe(200);
    refused.add(email.toLowerCase());
    const from = logs.length;
    const res = await api.post('/api/account/forgot-password', { email });
    expect(res.status).toBe(202);
    const line = (await logged('identity', 'could not send the password-reset email', from))!;
    expect(line, logs.slice(from).map((l) => l.line).join('\n')).toBeDefined();
    expect(leaks(email)).toEqual([]);
    expect(line.traceId).toMatch(/^[0-9a-f]{32}$/);
    expect(line.delivery).toMatchObject({ sender: 'smtp', responseCode: 550 });
    expect(leaks(email)).toEqual([]);
  });

  it('creates no invitation and no account (502 delivery-failed), and a retry once it is accepted makes exactly one', async () => {
    const email = refusedAddress('invitee');
    const body = { merchantId: m.id, firstName: 'Ada', lastName: 'Lovelace', email };
    const from = logs.length;
    const res = await api.post('/api/Invitations', body, { token: m.key });
    expect(res.status).toBe(502);
    expect(res.headers.get('content-type')).toMatch(/^application\/problem\+json/);
    expect(res.body.type).toMatch(/\/delivery-failed$/);
    expect(res.body.detail).toMatch(/not created/);
    expect(res.body.traceId).toMatch(/^[0-9a-f]{32}$/);
    expect(res.body.token).toBeUndefined();
    expect(JSON.stringify(res.body)).not.toContain(email);
    const line = (await logged('checkout', 'could not send an invitation: it was not created', from))!;
    expect(line).toBeDefined();
    expect(line.traceId).toBe(res.body.traceId);
    expect(logs.slice(from).filter((l) => /unhandled error/.test(l.line))).toEqual([]);

    expect(await invitationsOf(email)).toBe(0);
    expect(await accountsOf(email)).toBe(0);
    const listed = await api.get(`/api/Invitations?merchantId=${m.id}&pageSize=100`, { token: m.key });
    expect(listed.body.items.filter((i: { email: string }) => i.email === email)).toEqual([]);

    // Again refused: still nothing. Then accepted: one invitation, one account, one email.
    expect((await api.post('/api/Invitations', body, { token: m.key })).status).toBe(502);
    expect(await invitationsOf(email)).toBe(0);
    refused.delete(email.toLowerCase());
    const retry = await api.post('/api/Invitations', body, { token: m.key });
    expect(retry.status).toBe(200);
    expect(retry.body).toMatchObject({ outcome: 'Ok', email });
    expect(await invitationsOf(email)).toBe(1);
    expect(await accountsOf(email)).toBe(1);
    expect(smtp.received.filter((r) => r.to.includes(email))).toHaveLength(1);
    expect(leaks(email)).toEqual([]);
  });
});
