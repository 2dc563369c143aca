import { mkdtemp, readdir, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startFakeSmtpServer, type FakeSmtpServer } from '../../../tests/support/smtp-server.js';
import { createEmailSender, DeliveryFailed, deliveryFailureForLog, FileMessageSender, SmtpMessageSender } from './messaging.js';

let smtp: FakeSmtpServer;

beforeAll(async () => {
  smtp = await startFakeSmtpServer();
});

afterAll(() => smtp.close());

describe('email channels', () => {
  it('sends through SMTP when EMAIL_PROVIDER=smtp (Mailpit in docker-compose)', async () => {
    const sender = createEmailSender({ DATA_DIR: '.data', EMAIL_PROVIDER: 'smtp', EMAIL_SMTP_URL: smtp.url, EMAIL_FROM: 'Billing <no-reply@billing.test>' });
    expect(sender).toBeInstanceOf(SmtpMessageSender);
    await sender.send({ to: 'ada@example.com', subject: 'Verify your email', text: 'Open the link to verify.' });
    (sender as SmtpMessageSender).close();
    expect(smtp.received).toHaveLength(1);
    expect(smtp.received[0]!.from).toContain('no-reply@billing.test');
    expect(smtp.received[0]!.to.join()).toContain('ada@example.com');
    expect(smtp.received[0]!.data).toContain('Subject: Verify your email');
    expect(smtp.received[0]!.data).toContain('Open the link to verify.');
  });

  it('writes files by default and refuses smtp without a URL', () => {
    expect(createEmailSender({ DATA_DIR: '.data', EMAIL_PROVIDER: 'file', EMAIL_FROM: 'x <a@b.c>' })).toBeInstanceOf(FileMessageSender);
    expect(() => createEmailSender({ DATA_DIR: '.data', EMAIL_PROVIDER: 'smtp', EMAIL_FROM: 'x <a@b.c>' })).toThrow(/EMAIL_SMTP_URL/);
  });

  it('writes files into a directory that is missing at first or removed between messages', async () => {
    const root = await mkdtemp(join(tmpdir(), 'messaging-'));
    const dir = join(root, 'data', 'mail');
    const sender = new FileMessageSender(dir);
    await sender.send({ to: 'ada@example.com', subject: 'One', text: 'first' });
    expect(await readdir(dir)).toHaveLength(1);
    await rm(dir, { recursive: true });
    await sender.send({ to: 'ada@example.com', subject: 'Two', text: 'second' });
    expect((await readdir(dir)).filter((f) => f.endsWith('.json'))).toHaveLength(1);
    await rm(root, { recursive: true });
  });

  it('fails a refused recipient with the SMTP reply code, never the address the server quoted', async () => {
    const refusing = await startFakeSmtpServer((address) => address.startsWith('refused'));
    const sender = new SmtpMessageSender(`${refusing.url.replace('smtp://', 'smtp://user:secret-pw@')}`, 'Billing <no-reply@billing.test>');
    try {
      const failure = await sender.send({ to: 'refused.ada@example.com', subject: 'Verify', text: 'token abc' }).catch((e: unknown) => e);
      expect(failure).toBeInstanceOf(DeliveryFailed);
      expect(failure).toMatchObject({ sender: 'smtp', responseCode: 550 });
      expect(deliveryFailureForLog(failure)).toEqual({ sender: 'smtp', reason: (failure as DeliveryFailed).reason, responseCode: 550 });
      const everything = JSON.stringify({ ...(failure as object), message: (failure as Error).message, stack: (failure as Error).stack, cause: (failure as Error).cause });
      expect(everything).not.toMatch(/refused\.ada|example\.com|secret-pw|token abc/);
    } finally {
      sender.close();
      await refusing.close();
    }
  });

  it("logs another sender's error by its code only, never its message", () => {
    const foreign = Object.assign(new Error('could not reach <ada@example.com> at +61 400 000 000'), { code: 'EPROVIDER' });
    expect(deliveryFailureForLog(foreign)).toEqual({ sender: 'unknown', reason: 'EPROVIDER' });
    expect(JSON.stringify(deliveryFailureForLog(new Error('to ada@example.com')))).not.toContain('ada@');
  });
});
