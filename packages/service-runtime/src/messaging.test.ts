import { mkdtemp, readdir, rm } from 'node:fs/promises';
import { createServer, type Server } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createEmailSender, FileMessageSender, SmtpMessageSender } from './messaging.js';

/** A minimal SMTP server: enough of RFC 5321 to accept one message and keep its DATA. */
let server: Server;
let port = 0;
const received: { from: string; to: string[]; data: string }[] = [];

beforeAll(async () => {
  server = createServer((socket) => {
    let from = '';
    const to: string[] = [];
    let data: string | null = null;
    let buffer = '';
    socket.write('220 test ESMTP\r\n');
    socket.on('data', (chunk) => {
      buffer += chunk.toString('utf8');
      let i: number;
      while ((i = buffer.indexOf('\r\n')) >= 0) {
        const line = buffer.slice(0, i);
        buffer = buffer.slice(i + 2);
        if (data !== null) {
          if (line === '.') {
            received.push({ from, to: [...to], data });
            data = null;
            socket.write('250 queued\r\n');
          } else data += `${line}\n`;
          continue;
        }
        const cmd = line.slice(0, 4).toUpperCase();
        if (cmd === 'EHLO' || cmd === 'HELO') socket.write('250 test\r\n');
        else if (cmd === 'MAIL') (from = line), socket.write('250 ok\r\n');
        else if (cmd === 'RCPT') to.push(line), socket.write('250 ok\r\n');
        else if (cmd === 'DATA') (data = ''), socket.write('354 go\r\n');
        else if (cmd === 'QUIT') socket.end('221 bye\r\n');
        else socket.write('250 ok\r\n');
      }
    });
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  port = (server.address() as { port: number }).port;
});

afterAll(() => new Promise((r) => server.close(r)));

describe('email channels', () => {
  it('sends through SMTP when EMAIL_PROVIDER=smtp (Mailpit in docker-compose)', async () => {
    const sender = createEmailSender({ DATA_DIR: '.data', EMAIL_PROVIDER: 'smtp', EMAIL_SMTP_URL: `smtp://127.0.0.1:${port}`, EMAIL_FROM: 'Billing <no-reply@billing.test>' });
    expect(sender).toBeInstanceOf(SmtpMessageSender);
    await sender.send({ to: 'ada@example.com', subject: 'Verify your email', text: 'Open the link to verify.' });
    (sender as SmtpMessageSender).close();
    expect(received).toHaveLength(1);
    expect(received[0]!.from).toContain('no-reply@billing.test');
    expect(received[0]!.to.join()).toContain('ada@example.com');
    expect(received[0]!.data).toContain('Subject: Verify your email');
    expect(received[0]!.data).toContain('Open the link to verify.');
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
});
