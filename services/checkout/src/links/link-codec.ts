import { createHmac, timingSafeEqual } from 'node:crypto';
import { z } from 'zod';
import { Email, unstorableText } from '@billing/contracts';

/**
 * The payload of a checkout deep link (contract §6): `d` is base64url (no padding) of this
 * object as UTF-8 JSON, `s` is base64url (no padding) of HMAC-SHA256 over the ASCII bytes of
 * `d`, keyed with the decoded signing secret of API key `kid`. Merchants may sign links
 * themselves with exactly this recipe.
 */
export const LinkPayload = z.object({
  v: z.literal(1),
  kid: z.uuid(),
  mid: z.uuid(),
  pid: z.uuid(),
  nonce: z.string().min(8).max(128),
  /** Unix seconds. */
  exp: z.number().int().positive(),
  // Checked by returnUrlProblem at resolve; not z.url(), which trims the value it passes on.
  returnUrl: z.string().max(2048),
  customer: z
    .object({
      // A well-formed address, as POST /api/Checkout/links requires: a link naming anything else is not this JSON (InvalidSignature).
      email: Email.nullish(),
      firstName: z.string().max(100).nullish(),
      lastName: z.string().max(100).nullish(),
      phone: z.string().max(50).nullish(),
    })
    .nullish(),
});
export type LinkPayload = z.infer<typeof LinkPayload>;

const BASE64URL = /^[A-Za-z0-9_-]+$/;

/** The key bytes of a `whsec_<base64>` signing secret. */
export function signingKeyOf(secret: string): Buffer {
  return Buffer.from(secret.startsWith('whsec_') ? secret.slice('whsec_'.length) : secret, 'base64');
}

/** `d` for a payload: base64url (no padding) of its UTF-8 JSON. */
export function encodeLink(payload: LinkPayload): string {
  return Buffer.from(JSON.stringify(payload), 'utf8').toString('base64url');
}

/** `s` for `d`: base64url (no padding) of HMAC-SHA256 over the ASCII bytes of `d`. */
export function signLink(d: string, secret: string): string {
  return createHmac('sha256', signingKeyOf(secret)).update(d, 'ascii').digest('base64url');
}

const utf8 = new TextDecoder('utf-8', { fatal: true });
/** Arrays and objects a payload may nest (it has two: itself and `customer`); deeper is no payload. */
const MAX_PAYLOAD_DEPTH = 8;

/**
 * Whether every string in `value` (property names included) can be stored as text, within
 * MAX_PAYLOAD_DEPTH levels: a `d` of nested brackets (it is not signed yet) must cost a bounded
 * walk, not a stack overflow.
 */
function storable(value: unknown, depth = 0): boolean {
  if (typeof value === 'string') return unstorableText(value) === undefined;
  if (value === null || typeof value !== 'object') return true;
  if (depth >= MAX_PAYLOAD_DEPTH) return false;
  return Object.entries(value).every(([k, v]) => storable(k) && storable(v, depth + 1));
}

/**
 * The payload of `d`, or undefined when `d` is not base64url of the JSON above: also when its
 * bytes are not valid UTF-8 or a string holds a NUL or an unpaired surrogate (as any request
 * body's would be refused), rather than storing a replacement character or failing at the insert.
 */
export function decodeLink(d: string): LinkPayload | undefined {
  if (!BASE64URL.test(d)) return undefined;
  let json: unknown;
  try {
    json = JSON.parse(utf8.decode(Buffer.from(d, 'base64url')));
  } catch {
    return undefined;
  }
  if (!storable(json)) return undefined;
  const parsed = LinkPayload.safeParse(json);
  return parsed.success ? parsed.data : undefined;
}

/** Whether `s` is the signature of `d` under `secret`, compared in constant time. */
export function verifyLink(d: string, s: string, secret: string): boolean {
  if (!BASE64URL.test(s)) return false;
  const expected = createHmac('sha256', signingKeyOf(secret)).update(d, 'ascii').digest();
  const given = Buffer.from(s, 'base64url');
  // Length is public (always 32 bytes for a real signature); only equal lengths reach the compare.
  return given.length === expected.length && timingSafeEqual(given, expected);
}
