import { randomUUID } from 'node:crypto';
import { rename as renameCallback, writeFile as writeFileCallback } from 'node:fs';
import { mkdir } from 'node:fs/promises';
import { join, resolve } from 'node:path';
import { promisify } from 'node:util';
import type { Transporter } from 'nodemailer';
import { z } from 'zod';

/** An email to one recipient; plain text only. */
export interface EmailMessage {
  to: string;
  subject: string;
  text: string;
}

/**
 * `text` as one line, for a name someone else chose (a sign-up's first name, a merchant's name)
 * quoted in a message: every run of line breaks, other control characters, bidirectional
 * overrides and whitespace becomes one space. Names are stored as sent, line breaks included;
 * quoted verbatim, an anonymous sign-up for someone else's address could put paragraphs of its
 * own ("your account is locked, restore it at https://...") into an email the platform sends.
 */
export function oneLine(text: string): string {
  return text.replace(/[\s\p{Cc}\p{Zl}\p{Zp}\u200e\u200f\u202a-\u202e\u2066-\u2069]+/gu, ' ').trim();
}

/** An SMS to one phone number. */
export interface SmsMessage {
  to: string;
  text: string;
}

/**
 * A message a channel could not deliver. Its message and fields say which sender failed and
 * how (the library's error code, the SMTP reply code), never to whom or what: a mail library's
 * own error quotes the recipient's address (`550 5.1.1 <ada@example.com>: Recipient address
 * rejected`), and it must not reach a log or a caller. It carries no `cause` for the same reason
 * (pino's serializer appends every cause's message).
 */
export class DeliveryFailed extends Error {
  constructor(
    /** The sender that failed: `smtp`, `file`. */
    readonly sender: string,
    /** The failure's category: the library's or the system's error code (`EENVELOPE`, `ECONNREFUSED`, `EACCES`), else the error's type. */
    readonly reason: string,
    /** The SMTP server's reply code (e.g. 550), when it answered with one. */
    readonly responseCode?: number,
  ) {
    super(`the ${sender} sender could not deliver the message (${reason}${responseCode ? ` ${responseCode}` : ''})`);
    this.name = 'DeliveryFailed';
  }

  /** A sender's failure `e`, as a DeliveryFailed keeping only its code and SMTP reply code. */
  static of(sender: string, e: unknown): DeliveryFailed {
    if (e instanceof DeliveryFailed) return e;
    const { code, responseCode } = (e ?? {}) as { code?: unknown; responseCode?: unknown };
    const reason = typeof code === 'string' && /^[A-Za-z0-9_.-]{1,40}$/.test(code) ? code : e instanceof Error ? e.constructor.name : 'unknown';
    return new DeliveryFailed(sender, reason, typeof responseCode === 'number' ? responseCode : undefined);
  }
}

/**
 * What may be logged of a failed send: the sender, its code and SMTP reply code, never the
 * message text of an error (it can quote the recipient). For any MessageSender or SmsSender,
 * including ones that throw their own errors.
 */
export function deliveryFailureForLog(e: unknown): { sender: string; reason: string; responseCode?: number } {
  const failed = DeliveryFailed.of('unknown', e);
  return { sender: failed.sender, reason: failed.reason, ...(failed.responseCode ? { responseCode: failed.responseCode } : {}) };
}

/** The email channel. Implementations deliver or throw (a DeliveryFailed); they never log message bodies (they carry tokens). */
export interface MessageSender {
  send(message: EmailMessage): Promise<void>;
}

/** The SMS channel; exists only when an SMS provider is configured. Delivers or throws a DeliveryFailed. */
export interface SmsSender {
  send(message: SmsMessage): Promise<void>;
}

// The callback API, promisified, not node:fs/promises: its writeFile opens a FileHandle (an
// object tracked until closed) and costs about a fifth more CPU per message and twice the
// event-loop time, on the path of every invitation and verification email.
const writeFile = promisify(writeFileCallback);
const rename = promisify(renameCallback);

/**
 * Writes each message as one JSON file (`{ id, channel, sentAt, ...message }`) in a directory,
 * named `<sentAt>-<id>.json` so a listing sorts by time. The file appears complete or not at
 * all (written beside, then renamed), so a reader polling the directory never sees half a message.
 */
class FileOutbox {
  constructor(
    private readonly dir: string,
    private readonly channel: 'email' | 'sms',
  ) {}

  async write(message: EmailMessage | SmsMessage): Promise<void> {
    const id = randomUUID();
    const sentAt = new Date().toISOString();
    const name = `${sentAt.replace(/[:.]/g, '-')}-${id}.json`;
    const tmp = join(this.dir, `.${name}.tmp`);
    const body = JSON.stringify({ id, channel: this.channel, sentAt, ...message }, null, 2);
    // The directory is created when a write finds it missing (first message, or removed since),
    // not before every message.
    try {
      await writeFile(tmp, body, { mode: 0o600 });
    } catch (e) {
      if ((e as NodeJS.ErrnoException).code !== 'ENOENT') throw e;
      await mkdir(this.dir, { recursive: true });
      await writeFile(tmp, body, { mode: 0o600 });
    }
    await rename(tmp, join(this.dir, name));
  }
}

/** The default email channel: files under `<dataDir>/mail/`. */
export class FileMessageSender implements MessageSender {
  private readonly outbox: FileOutbox;
  constructor(readonly dir: string) {
    this.outbox = new FileOutbox(dir, 'email');
  }
  send(message: EmailMessage): Promise<void> {
    return this.outbox.write(message).catch((e: unknown) => {
      throw DeliveryFailed.of('file', e);
    });
  }
}

/**
 * The `smtp` email channel (nodemailer): one pooled SMTP connection to `EMAIL_SMTP_URL`
 * (e.g. `smtp://mailpit:1025`; `smtps://user:pass@host:465` for implicit TLS; STARTTLS is used
 * when the server offers it).
 */
export class SmtpMessageSender implements MessageSender {
  // nodemailer (about 6 MB of RSS) is imported by the first send, so that the services whose
  // config merely could send email (every one that imports this package) never load it.
  private transport: Promise<Transporter> | undefined;
  constructor(
    private readonly url: string,
    private readonly from: string,
  ) {}
  async send(message: EmailMessage): Promise<void> {
    this.transport ??= import('nodemailer').then(({ default: nodemailer }) => nodemailer.createTransport(this.url.includes('?') ? `${this.url}&pool=true` : `${this.url}?pool=true`));
    try {
      await (await this.transport).sendMail({ from: this.from, to: message.to, subject: message.subject, text: message.text });
    } catch (e) {
      // nodemailer's error (message, `response`, `rejected`) quotes the recipient; the URL may hold credentials.
      throw DeliveryFailed.of('smtp', e);
    }
  }
  close(): void {
    void this.transport?.then((t) => t.close(), () => undefined);
  }
}

/** The `file` SMS provider: files under `<dataDir>/sms/`. */
export class FileSmsSender implements SmsSender {
  private readonly outbox: FileOutbox;
  constructor(readonly dir: string) {
    this.outbox = new FileOutbox(dir, 'sms');
  }
  send(message: SmsMessage): Promise<void> {
    return this.outbox.write(message).catch((e: unknown) => {
      throw DeliveryFailed.of('file', e);
    });
  }
}

/** Env settings of the delivery channels; extend a service's config with these. */
export const MessagingConfig = z.object({
  /** Directory for the file-based channels (`mail/`, `sms/`); relative paths are from the working directory. */
  DATA_DIR: z.string().min(1).default('.data'),
  /** `file`: emails written under `<DATA_DIR>/mail/`. `smtp`: sent to EMAIL_SMTP_URL (Mailpit in docker-compose). */
  EMAIL_PROVIDER: z.enum(['file', 'smtp']).default('file'),
  /** SMTP server URL for EMAIL_PROVIDER=smtp, e.g. smtp://mailpit:1025. */
  EMAIL_SMTP_URL: z.string().url().optional(),
  /** Sender address of emails sent by SMTP. */
  EMAIL_FROM: z.string().min(3).default('Billing Platform <no-reply@billing.invalid>'),
  /** `none`: no SMS channel. `file`: SMS written under `<DATA_DIR>/sms/`. */
  SMS_PROVIDER: z.enum(['none', 'file']).default('none'),
});
export type MessagingConfig = z.infer<typeof MessagingConfig>;

/** The email channel the config selects; throws when SMTP is selected without a URL. */
export function createEmailSender(config: Pick<MessagingConfig, 'DATA_DIR' | 'EMAIL_PROVIDER' | 'EMAIL_SMTP_URL' | 'EMAIL_FROM'>): MessageSender {
  if (config.EMAIL_PROVIDER === 'smtp') {
    if (!config.EMAIL_SMTP_URL) throw new Error('EMAIL_SMTP_URL is required when EMAIL_PROVIDER=smtp');
    return new SmtpMessageSender(config.EMAIL_SMTP_URL, config.EMAIL_FROM);
  }
  return new FileMessageSender(join(resolve(config.DATA_DIR), 'mail'));
}

/** The channels a service can deliver through. `sms` is undefined unless a provider is configured. */
export interface DeliveryChannels {
  email: MessageSender;
  sms?: SmsSender;
  readonly smsEnabled: boolean;
}

export function createDeliveryChannels(config: MessagingConfig): DeliveryChannels {
  const dataDir = resolve(config.DATA_DIR);
  const sms = config.SMS_PROVIDER === 'file' ? new FileSmsSender(join(dataDir, 'sms')) : undefined;
  return { email: createEmailSender(config), sms, smsEnabled: sms !== undefined };
}
