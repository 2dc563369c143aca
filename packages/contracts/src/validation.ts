import { z, type ZodError, type ZodType } from 'zod';
import { DomainError, type FieldErrors } from './errors.js';

const MISSING_CODES: ReadonlySet<string> = new Set(['invalid_type', 'invalid_union', 'invalid_value']);

/**
 * The words of a failed check whose schema gives none, in the words the rest of the API uses
 * ("Must be at most 128 characters."), not zod's ("Too big: expected string to have <=128
 * characters", "Invalid input: expected string, received undefined"): a missing field is
 * "Required."; a null where a value is required "Must not be null."; a length or size bound says
 * its limit. A message a schema gives itself still wins; other checks keep zod's words.
 */
export function validationMessage(issue: z.core.$ZodRawIssue): string | undefined {
  if (MISSING_CODES.has(issue.code ?? '')) {
    if (issue.input === undefined) return 'Required.';
    if (issue.input === null && issue.code === 'invalid_type') return 'Must not be null.';
    return undefined;
  }
  if (issue.code === 'too_big' || issue.code === 'too_small') {
    const big = issue.code === 'too_big';
    const bound = Number(big ? issue.maximum : issue.minimum);
    const inclusive = issue.inclusive !== false;
    const word = big ? (inclusive ? 'at most' : 'less than') : inclusive ? 'at least' : 'more than';
    if (issue.origin === 'string') return !big && inclusive && bound === 1 ? 'Must not be empty.' : `Must be ${word} ${bound} character${bound === 1 ? '' : 's'}.`;
    if (issue.origin === 'array' || issue.origin === 'set') return !big && inclusive && bound === 1 ? 'Must not be empty.' : `Must have ${word} ${bound} item${bound === 1 ? '' : 's'}.`;
    if (issue.origin === 'number' || issue.origin === 'int' || issue.origin === 'bigint') return `Must be ${word} ${bound}.`;
  }
  return undefined;
}
z.config({ customError: validationMessage });

/** camelCase JSON path of a zod issue: `orders[0].id`; the whole body is `$`. */
export function fieldPath(path: ReadonlyArray<PropertyKey>): string {
  let out = '';
  for (const seg of path) {
    if (typeof seg === 'number') out += `[${seg}]`;
    else out += out ? `.${String(seg)}` : String(seg);
  }
  return out || '$';
}

/** Each failing field's messages, each message once (two checks may fail with the same words). */
export function fieldErrorsOf(error: ZodError): FieldErrors {
  const errors: FieldErrors = {};
  for (const issue of error.issues) {
    const messages = (errors[fieldPath(issue.path)] ??= []);
    if (!messages.includes(issue.message)) messages.push(issue.message);
  }
  return errors;
}

/** Parse or throw a validation `DomainError` naming every failing field. */
export function parseOrThrow<S extends ZodType>(schema: S, value: unknown): z.output<S> {
  const result = schema.safeParse(value);
  if (!result.success) throw DomainError.validation(fieldErrorsOf(result.error));
  return result.data;
}
