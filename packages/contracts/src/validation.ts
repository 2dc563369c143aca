import { z as zod, type ZodError, type ZodType, type z } from 'zod';
import { DomainError, type FieldErrors } from './errors.js';

// A field that is missing is "Required." wherever it is checked (zod's own words are "Invalid
// input: expected string, received undefined", or "Invalid input" for a union); a message a
// schema gives itself still wins.
const MISSING_CODES: ReadonlySet<string> = new Set(['invalid_type', 'invalid_union', 'invalid_value']);
zod.config({ customError: (issue) => (issue.input === undefined && MISSING_CODES.has(issue.code ?? '') ? 'Required.' : undefined) });

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
