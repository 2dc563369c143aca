import { createServer, type Server, type Socket } from 'node:net';

/** A message the fake SMTP server accepted. */
export interface SmtpMessage {
  from: string;
  to: string[];
  data: string;
}

export interface FakeSmtpServer {
  url: string;
  /** Messages accepted so far. */
  received: SmtpMessage[];
  /** Whether a recipient is refused with `550 5.1.1 <address>: Recipient address rejected` (as real servers quote it). */
  rejects: (address: string) => boolean;
  close(): Promise<void>;
}

/**
 * A minimal SMTP server (enough of RFC 5321 for nodemailer): accepts messages, or refuses each
 * recipient `rejects` says, replying the way real servers do, with the address in the reply.
 */
export async function startFakeSmtpServer(rejects: (address: string) => boolean = () => false): Promise<FakeSmtpServer> {
  const received: SmtpMessage[] = [];
  const sockets = new Set<Socket>();
  const fake = { received, rejects } as FakeSmtpServer;
  const server: Server = createServer((socket) => {
    sockets.add(socket);
    socket.on('close', () => sockets.delete(socket));
    socket.on('error', () => undefined);
    let from = '';
    let to: string[] = [];
    let data: string | null = null;
    let buffer = '';
    socket.write('220 fake ESMTP\r\n');
    socket.on('data', (chunk) => {
      buffer += chunk.toString('utf8');
      let i: number;
      while ((i = buffer.indexOf('\r\n')) >= 0) {
        const line = buffer.slice(0, i);
        buffer = buffer.slice(i + 2);
        if (data !== null) {
          if (line === '.') {
            received.push({ from, to, data });
            data = null;
            to = [];
            socket.write('250 queued\r\n');
          } else data += `${line}\n`;
          continue;
        }
        const cmd = line.slice(0, 4).toUpperCase();
        if (cmd === 'EHLO' || cmd === 'HELO') socket.write('250 fake\r\n');
        else if (cmd === 'MAIL') (from = line), (to = []), socket.write('250 ok\r\n');
        else if (cmd === 'RCPT') {
          const address = /<([^>]*)>/.exec(line)?.[1] ?? '';
          if (fake.rejects(address)) socket.write(`550 5.1.1 <${address}>: Recipient address rejected\r\n`);
          else to.push(address), socket.write('250 ok\r\n');
        } else if (cmd === 'DATA') (data = ''), socket.write('354 go\r\n');
        else if (cmd === 'RSET') (to = []), (data = null), socket.write('250 ok\r\n');
        else if (cmd === 'QUIT') socket.end('221 bye\r\n');
        else socket.write('250 ok\r\n');
      }
    });
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  fake.url = `smtp://127.0.0.1:${(server.address() as { port: number }).port}`;
  fake.close = () =>
    new Promise<void>((r) => {
      for (const s of sockets) s.destroy();
      server.close(() => r());
    });
  return fake;
}
