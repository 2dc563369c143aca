import { createHmac } from 'node:crypto';

const SECRET_PREFIX = 'whsec_';

/** The HMAC key of a `whsec_<base64>` signing secret: the decoded bytes after the prefix. */
export function signingKey(secret: string): Buffer {
  if (!secret.startsWith(SECRET_PREFIX)) throw new Error('signing secret must start with whsec_');
  return Buffer.from(secret.slice(SECRET_PREFIX.length), 'base64');
}

/**
 * Standard Webhooks signature headers of one attempt: `webhook-id` (the event id, the same on
 * every attempt), `webhook-timestamp` (unix seconds of this attempt) and `webhook-signature`
 * (`v1,` + base64 HMAC-SHA256 of `{id}.{timestamp}.{body}`).
 */
export function signatureHeaders(key: Buffer, id: string, timestampSeconds: number, body: string): Record<string, string> {
  const mac = createHmac('sha256', key).update(`${id}.${timestampSeconds}.${body}`).digest('base64');
  return { 'webhook-id': id, 'webhook-timestamp': String(timestampSeconds), 'webhook-signature': `v1,${mac}` };
}
