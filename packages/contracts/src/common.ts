import { z } from 'zod';

/**
 * The error of a required field's type check: `Required.` when it is absent or null, else
 * `Must be a <what>.` (a value of the wrong type was sent, which "Required." would misdescribe).
 */
export const required = (what = 'string') => ({
  error: (issue: { input?: unknown }) => (issue.input === undefined || issue.input === null ? 'Required.' : `Must be a ${what}.`),
});

export const Uuid = z.uuid({ message: 'Must be a valid UUID.' });
/**
 * The id a path names: any 8-4-4-4-12 hex string (`z.guid`), as Postgres's uuid type and the
 * services' `isUuidText` take it. RFC 9562's version and variant digits are not required: an id
 * a client made up (`00000000-0000-0000-0000-000000000001`) names nothing (404), it is not
 * malformed (400). Bodies and events keep `Uuid`: the ids the platform makes are RFC 9562 ones.
 */
export const PathId = z.guid({ message: 'Must be a valid UUID.' });
/** Instants a date or date-time may name: years 0001 to 9999 in UTC, what storage and ISO 8601's four-digit years hold. */
const EARLIEST_INSTANT = Date.parse('0001-01-01T00:00:00Z');
/** The latest instant stored (ms): the last of the year 9999. */
export const LATEST_INSTANT = Date.parse('9999-12-31T23:59:59.999Z');
const RANGE_MESSAGE = 'Must fall in the years 0001 to 9999 (UTC).';
const inRange = (s: string) => {
  const t = Date.parse(s);
  return t >= EARLIEST_INSTANT && t <= LATEST_INSTANT;
};

export const DateTime = z.iso.datetime({ offset: true, message: 'Must be an ISO 8601 date-time.' }).refine(inRange, RANGE_MESSAGE);
/** A calendar date (`YYYY-MM-DD`), read as midnight UTC. */
export const IsoDate = z.iso.date({ message: 'Must be an ISO 8601 date or date-time.' }).refine(inRange, RANGE_MESSAGE);
/** An unpaired UTF-16 surrogate: a high one not followed by a low one, or a low one not after a high one. */
const LONE_SURROGATE = /[\ud800-\udbff](?![\udc00-\udfff])|(?<![\ud800-\udbff])[\udc00-\udfff]/;

/**
 * Why `s` cannot be stored as text, or undefined when it can: a NUL (U+0000), or a lone UTF-16
 * surrogate (`\ud800` in JSON), which no UTF-8 text can carry.
 */
export function unstorableText(s: string): string | undefined {
  if (s.includes('\u0000')) return 'Must not contain a NUL character (U+0000).';
  if (LONE_SURROGATE.test(s)) return 'Must be valid Unicode text (no unpaired surrogates).';
  return undefined;
}

/**
 * Whitespace and control characters, which no URI holds (RFC 3986): a URL kept exactly as sent
 * is refused when it has one anywhere, rather than trimmed (as `z.url()` and `new URL` do).
 */
export const hasNonUriCharacter = (s: string): boolean => /[\s\u0000-\u001f\u007f]/.test(s);

export const Email = z.email({ message: 'Must be a valid email address.' }).max(256, 'Must be at most 256 characters.');

/**
 * Free text of at most `max` characters that must hold at least one non-whitespace character.
 * Stored and returned exactly as sent (contract §2): never trimmed or normalised.
 */
export const NonBlankText = (max: number) =>
  z.string().max(max, `Must be at most ${max} characters.`).regex(/\S/, 'Must contain a non-whitespace character.');

/**
 * A password schema that also refuses whitespace alone, like every required text (contract §2);
 * its lengths are the caller's (new passwords 8 to 128, sign-ins 1 to 128).
 */
export const nonBlankPassword = (s: z.ZodString) => s.regex(/\S/, 'Must contain a character other than whitespace.');

const UUID_TEXT = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i;

/**
 * Whether `value` has the 8-4-4-4-12 hex shape of a uuid (any version, either case). Services
 * answer not-found for ids without it, rather than letting Postgres reject them as a uuid.
 */
export function isUuidText(value: string): boolean {
  return UUID_TEXT.test(value);
}

/** The distinct `ids` that have the shape of a uuid (`isUuidText`), lower-cased: what a batch looks up; the others find nothing. */
export function distinctUuids(ids: readonly string[]): string[] {
  return [...new Set(ids.filter(isUuidText).map((id) => id.toLowerCase()))];
}

/** Largest `page`: pages are int32 (interface.md), so a larger one is 400 rather than wrapping. */
export const MAX_PAGE = 2_147_483_647;

/**
 * An integer query value: decimal digits with an optional minus sign, nothing else. `Number()`
 * (z.coerce) also took `0x10`, `1e1`, `0b11`, ` 3` and `1.0` as integers.
 */
function queryInt<T extends z.ZodType>(bounds: T) {
  return z.preprocess((v) => (typeof v === 'string' && /^-?[0-9]+$/.test(v) ? Number(v) : v), bounds);
}
const WHOLE_NUMBER = { error: (issue: { code: string }) => (issue.code === 'invalid_type' ? 'Must be a whole number (decimal digits).' : undefined) };

/** Query `page`/`pageSize` of every paged collection (page 1 to MAX_PAGE, pageSize at most 200). */
export const PageQuery = z.object({
  page: queryInt(z.number(WHOLE_NUMBER).int().min(1).max(MAX_PAGE).default(1)),
  pageSize: queryInt(z.number(WHOLE_NUMBER).int().min(1).max(200).default(50)),
});
export type PageQuery = z.infer<typeof PageQuery>;

export function Paged<T extends z.ZodType>(item: T) {
  return z.object({
    items: z.array(item),
    page: z.number().int(),
    pageSize: z.number().int(),
    totalCount: z.number().int(),
    totalPages: z.number().int(),
    hasNextPage: z.boolean(),
    hasPreviousPage: z.boolean(),
  });
}

export interface Page<T> {
  items: T[];
  page: number;
  pageSize: number;
  totalCount: number;
  totalPages: number;
  hasNextPage: boolean;
  hasPreviousPage: boolean;
}

export function toPage<T>(items: T[], totalCount: number, q: PageQuery): Page<T> {
  const totalPages = Math.ceil(totalCount / q.pageSize);
  return {
    items,
    page: q.page,
    pageSize: q.pageSize,
    totalCount,
    totalPages,
    hasNextPage: q.page < totalPages,
    hasPreviousPage: q.page > 1,
  };
}

/** limit/offset of a 1-based page; pageSize is held to 1..200 whatever the caller sends. */
export function pageWindow(req: { page: number; pageSize: number }): { limit: number; offset: number } {
  const pageSize = Math.min(Math.max(req.pageSize || 50, 1), 200);
  const page = Math.max(req.page || 1, 1);
  return { limit: pageSize, offset: (page - 1) * pageSize };
}

/** Every error body (contract §2: type, title, status, detail and traceId always; instance on every answer of a route). */
export const ProblemDetails = z
  .object({
    type: z.string(),
    title: z.string(),
    status: z.number().int(),
    detail: z.string(),
    instance: z.string().optional(),
    traceId: z.string().meta({ description: 'The trace id of the request, as in the X-Trace-Id header.' }),
    errors: z.record(z.string(), z.array(z.string())).optional(),
  })
  .catchall(z.unknown())
  .meta({ id: 'ProblemDetails' });
