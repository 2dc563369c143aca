import { readdir, readFile } from 'node:fs/promises';
import { join } from 'node:path';

/** A message written by the file-based channels (`<dataDir>/mail/*.json`, `<dataDir>/sms/*.json`). */
export interface DeliveredMessage {
  id: string;
  channel: 'email' | 'sms';
  sentAt: string;
  to: string;
  subject?: string;
  text: string;
}

/** Every message delivered so far on a channel, oldest first. */
export async function readMessages(dataDir: string, channel: 'mail' | 'sms' = 'mail'): Promise<DeliveredMessage[]> {
  const dir = join(dataDir, channel);
  let names: string[];
  try {
    names = (await readdir(dir)).filter((n) => n.endsWith('.json') && !n.startsWith('.')).sort();
  } catch (e) {
    if ((e as NodeJS.ErrnoException).code === 'ENOENT') return [];
    throw e;
  }
  return Promise.all(names.map(async (n) => JSON.parse(await readFile(join(dir, n), 'utf8')) as DeliveredMessage));
}

/** Messages to `to` (case-insensitive), oldest first. */
export async function messagesTo(dataDir: string, to: string, channel: 'mail' | 'sms' = 'mail'): Promise<DeliveredMessage[]> {
  return (await readMessages(dataDir, channel)).filter((m) => m.to.toLowerCase() === to.toLowerCase());
}

/** Waits until a message to `to` matching `match` has been delivered; throws after `timeoutMs`. */
export async function waitForMessage(
  dataDir: string,
  to: string,
  match: (m: DeliveredMessage) => boolean = () => true,
  opts: { channel?: 'mail' | 'sms'; timeoutMs?: number } = {},
): Promise<DeliveredMessage> {
  const end = Date.now() + (opts.timeoutMs ?? 10_000);
  for (;;) {
    const found = (await messagesTo(dataDir, to, opts.channel)).filter(match).at(-1);
    if (found) return found;
    if (Date.now() > end) throw new Error(`no ${opts.channel ?? 'mail'} message to ${to} arrived in time`);
    await new Promise((r) => setTimeout(r, 50));
  }
}

/** The first link in `text` that points at `/<page>` and carries a `token`, as written. */
export function linkFrom(text: string, page: string): string {
  const link = text.match(/https?:\/\/\S+/g)?.find((u) => {
    const url = new URL(u);
    return url.pathname.endsWith(`/${page}`) && url.searchParams.get('token');
  });
  if (!link) throw new Error(`no /${page} link with a token in: ${text}`);
  return link;
}

/** The `token` query parameter of the first link in `text` that points at `/<page>`. */
export function tokenFromLink(text: string, page: string): string {
  return new URL(linkFrom(text, page)).searchParams.get('token')!;
}
