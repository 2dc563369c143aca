import { randomUUID } from 'node:crypto';
import { mkdir, rename, writeFile } from 'node:fs/promises';
import { join, resolve } from 'node:path';
import { z } from 'zod';

/** An email to one recipient; plain text only. */
export interface EmailMessage {
  to: string;
  subject: string;
  text: string;
}

/** An SMS to one phone number. */
export interface SmsMessage {
  to: string;
  text: string;
}

/** The email channel. Implementations deliver or throw; they never log message bodies (they carry tokens). */
export interface MessageSender {
  send(message: EmailMessage): Promise<void>;
}

/** The SMS channel; exists only when an SMS provider is configured. */
export interface SmsSender {
  send(message: SmsMessage): Promise<void>;
}

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
    await mkdir(this.dir, { recursive: true });
    const id = randomUUID();
    const sentAt = new Date().toISOString();
    const name = `${sentAt.replace(/[:.]/g, '-')}-${id}.json`;
    const tmp = join(this.dir, `.${name}.tmp`);
    await writeFile(tmp, JSON.stringify({ id, channel: this.channel, sentAt, ...message }, null, 2), { mode: 0o600 });
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
    return this.outbox.write(message);
  }
}

/** The `file` SMS provider: files under `<dataDir>/sms/`. */
export class FileSmsSender implements SmsSender {
  private readonly outbox: FileOutbox;
  constructor(readonly dir: string) {
    this.outbox = new FileOutbox(dir, 'sms');
  }
  send(message: SmsMessage): Promise<void> {
    return this.outbox.write(message);
  }
}

/** Env settings of the delivery channels; extend a service's config with these. */
export const MessagingConfig = z.object({
  /** Directory for the file-based channels (`mail/`, `sms/`); relative paths are from the working directory. */
  DATA_DIR: z.string().min(1).default('.data'),
  /** `none`: no SMS channel. `file`: SMS written under `<DATA_DIR>/sms/`. */
  SMS_PROVIDER: z.enum(['none', 'file']).default('none'),
});
export type MessagingConfig = z.infer<typeof MessagingConfig>;

/** The channels a service can deliver through. `sms` is undefined unless a provider is configured. */
export interface DeliveryChannels {
  email: MessageSender;
  sms?: SmsSender;
  readonly smsEnabled: boolean;
}

export function createDeliveryChannels(config: MessagingConfig): DeliveryChannels {
  const dataDir = resolve(config.DATA_DIR);
  const sms = config.SMS_PROVIDER === 'file' ? new FileSmsSender(join(dataDir, 'sms')) : undefined;
  return { email: new FileMessageSender(join(dataDir, 'mail')), sms, smsEnabled: sms !== undefined };
}
