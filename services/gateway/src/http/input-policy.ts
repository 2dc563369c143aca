import { DomainError, fieldPath, unstorableText, type FieldErrors } from '@billing/contracts';

/**
 * The gateway's one input policy for text (contract §2 as amended), applied before a request
 * reaches a handler, a backing service or the idempotency store:
 * - a body that is not valid UTF-8 is 400 (never silently replaced by U+FFFD);
 * - a NUL (U+0000) or a lone UTF-16 surrogate (which no UTF-8 text can carry; `\ud800` in JSON)
 *   in any body string, at any depth, or in any query value is 400 naming the field;
 * - text is otherwise passed on exactly as sent: no trimming, no normalisation;
 * - a body nested deeper than `BODY_MAX_DEPTH` arrays and objects is 400 (no API body needs more
 *   than a few levels, and checking an unbounded depth would exhaust the stack: a 500).
 */

const utf8 = new TextDecoder('utf-8', { fatal: true });
const lossyUtf8 = new TextDecoder('utf-8');

const INVALID_UTF8_MESSAGE = 'Must be valid UTF-8.';
/** Default of `BODY_MAX_DEPTH`: arrays and objects inside one another, the body itself the first. */
export const DEFAULT_BODY_MAX_DEPTH = 32;
const tooDeep = (maxDepth: number) => `Must be nested at most ${maxDepth} arrays and objects deep.`;

/**
 * Fields a refusal names at most: a body of 60,000 bad fields is refused as well by its first
 * twenty, and its answer stays small (it was megabytes, several times the request).
 */
export const MAX_FIELDS_NAMED = 20;

const isFull = (errors: FieldErrors) => Object.keys(errors).length >= MAX_FIELDS_NAMED;

/** Adds `message` for `path` unless MAX_FIELDS_NAMED other fields are named already. */
function addError(errors: FieldErrors, path: string, message: string): void {
  const named = errors[path];
  if (named) named.push(message);
  else if (!isFull(errors)) errors[path] = [message];
}

/**
 * Strings holding U+FFFD a body that is not UTF-8 has looked for in its raw bytes (a scan of them
 * each) before the rest of it is left unnamed: thousands of such strings would cost seconds.
 */
const MAX_SUSPECT_SCANS = MAX_FIELDS_NAMED * 5;

/**
 * Arrays and objects a JSON text opens before it is parsed at all: a body thousands deep is
 * refused by one scan of its bytes, without building what it nests (parsing 1 MiB of "[" cost
 * the gateway tens to hundreds of milliseconds). A body deeper than `maxDepth` but within this is
 * parsed and named where it went too deep.
 */
const PARSE_DEPTH_LIMIT = 1000;

/** Whether `text` opens more than PARSE_DEPTH_LIMIT (or `maxDepth`, if higher) arrays and objects inside one another. */
function tooDeepToParse(text: string, maxDepth: number): boolean {
  const limit = Math.max(PARSE_DEPTH_LIMIT, maxDepth);
  let depth = 0;
  let inString = false;
  for (let i = 0; i < text.length; i++) {
    const c = text.charCodeAt(i);
    if (inString) {
      if (c === 0x5c) i++; // backslash: skip the escaped character
      else if (c === 0x22) inString = false;
    } else if (c === 0x22) inString = true;
    else if (c === 0x5b || c === 0x7b) {
      if (++depth > limit) return true;
    } else if (c === 0x5d || c === 0x7d) depth--;
  }
  return false;
}

/** A 400 for a JSON text nested far deeper than any body may be, before it is parsed. */
export function assertParseableDepth(text: string, maxDepth = DEFAULT_BODY_MAX_DEPTH): void {
  if (tooDeepToParse(text, maxDepth)) throw DomainError.validation({ $: [tooDeep(maxDepth)] }, 'The request body is nested too deep.');
}

/**
 * Adds a problem for every string (value or property name) in `value` that cannot be stored, and
 * for the first array or object nested deeper than `maxDepth` (its contents are not visited).
 */
function collect(value: unknown, path: PropertyKey[], errors: FieldErrors, maxDepth: number, depth = 0): void {
  if (isFull(errors)) return;
  if (typeof value === 'string') {
    const problem = unstorableText(value);
    if (problem) addError(errors, fieldPath(path), problem);
    return;
  }
  if (value === null || typeof value !== 'object') return;
  if (depth >= maxDepth) {
    addError(errors, fieldPath(path), tooDeep(maxDepth));
    return;
  }
  if (Array.isArray(value)) {
    for (let i = 0; i < value.length && !isFull(errors); i++) collect(value[i], [...path, i], errors, maxDepth, depth + 1);
    return;
  }
  for (const [k, v] of Object.entries(value)) {
    if (isFull(errors)) return;
    const keyProblem = unstorableText(k);
    // A bad property name is named by its escaped form, so the path itself stays printable.
    if (keyProblem) addError(errors, fieldPath([...path, JSON.stringify(k).slice(1, -1)]), keyProblem);
    else collect(v, [...path, k], errors, maxDepth, depth + 1);
  }
}

/** The JSON body text of `raw`, or a 400 naming the field holding invalid UTF-8 where it can. */
export function decodeUtf8Body(raw: Buffer, maxDepth = DEFAULT_BODY_MAX_DEPTH): string {
  try {
    return utf8.decode(raw);
  } catch {
    throw DomainError.validation(invalidUtf8Fields(raw, maxDepth), 'The request body is not valid UTF-8.');
  }
}

/**
 * Which fields of a body that failed strict decoding hold the invalid bytes: each string the
 * lossy decode turned into U+FFFD whose JSON form does not appear in the raw bytes (a genuine
 * U+FFFD sent as UTF-8 does). `$` when the body is not JSON or the field cannot be told.
 */
function invalidUtf8Fields(raw: Buffer, maxDepth: number): FieldErrors {
  const errors: FieldErrors = {};
  let parsed: unknown;
  try {
    const text = lossyUtf8.decode(raw);
    if (tooDeepToParse(text, maxDepth)) return { $: [INVALID_UTF8_MESSAGE] };
    parsed = JSON.parse(text);
  } catch {
    return { $: [INVALID_UTF8_MESSAGE] };
  }
  // Each string holding U+FFFD is looked for in the raw bytes; after MAX_SUSPECT_SCANS the rest
  // of the body is not looked at, and what was not named is `$`.
  let scans = 0;
  const suspect = (text: string) => text.includes('\ufffd') && ++scans <= MAX_SUSPECT_SCANS && !raw.includes(Buffer.from(JSON.stringify(text).slice(1, -1)));
  const visit = (value: unknown, path: PropertyKey[]): void => {
    if (path.length > maxDepth || isFull(errors) || scans > MAX_SUSPECT_SCANS) return; // named as `$` below, unless a shallower field is named
    if (typeof value === 'string') {
      if (suspect(value)) addError(errors, fieldPath(path), INVALID_UTF8_MESSAGE);
    } else if (Array.isArray(value)) {
      for (let i = 0; i < value.length && !isFull(errors); i++) visit(value[i], [...path, i]);
    } else if (value !== null && typeof value === 'object') {
      for (const [k, v] of Object.entries(value)) {
        if (isFull(errors)) return;
        if (suspect(k)) addError(errors, fieldPath([...path, k]), INVALID_UTF8_MESSAGE);
        else visit(v, [...path, k]);
      }
    }
  };
  visit(parsed, []);
  return Object.keys(errors).length > 0 ? errors : { $: [INVALID_UTF8_MESSAGE] };
}

/**
 * Throws a 400 naming every body field and query value that holds text no service may store.
 * Query values are named by their parameter (`email`); body fields by their JSON path.
 */
export function assertStorableText(input: { body?: unknown; query?: unknown; params?: unknown }, maxDepth = DEFAULT_BODY_MAX_DEPTH): void {
  const errors: FieldErrors = {};
  if (input.query !== undefined) collect(input.query, [], errors, maxDepth);
  if (input.params !== undefined) collect(input.params, [], errors, maxDepth);
  if (input.body !== undefined) collect(input.body, [], errors, maxDepth);
  if (Object.keys(errors).length > 0) throw DomainError.validation(errors);
}

/**
 * A 400 when the query string percent-encodes bytes that are not UTF-8 (`?q=%FF`): the query
 * parser would otherwise hand on U+FFFD or the raw escape.
 */
export function assertUtf8Query(url: string): void {
  const q = url.indexOf('?');
  if (q < 0) return;
  for (const pair of url.slice(q + 1).split('&')) {
    if (!pair.includes('%')) continue;
    const eq = pair.indexOf('=');
    const name = eq < 0 ? pair : pair.slice(0, eq);
    try {
      decodeURIComponent(pair.replace(/\+/g, ' ').slice(eq < 0 ? 0 : eq + 1));
      decodeURIComponent(name);
    } catch {
      let field = name;
      try {
        field = decodeURIComponent(name);
      } catch {
        field = '$query';
      }
      throw DomainError.validation({ [field]: [INVALID_UTF8_MESSAGE] }, 'The query string is not valid UTF-8.');
    }
  }
}
