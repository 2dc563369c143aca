import { DomainError } from '@billing/contracts';

/**
 * A reply's embedded message (proto3 decodes an unset message field as null). A backend that
 * leaves it unset broke its contract: a 500, not a REST body with holes.
 */
export function present<T>(value: T | null | undefined, what: string): T {
  if (value == null) throw new Error(`backend reply without ${what}`);
  return value;
}

/** A proto string that the REST contract types as one of `values`; anything else is a backend bug. */
export function oneOf<T extends string>(values: readonly T[], value: string, what: string): T {
  if ((values as readonly string[]).includes(value)) return value as T;
  throw new Error(`backend reply with unknown ${what} ${JSON.stringify(value)}`);
}

/** Proto3 optional fields decode as absent; REST bodies show them as null. */
export function orNull<T>(value: T | undefined): T | null {
  return value ?? null;
}

/** A body id that differs from the path id is a 400: the path identifies the resource. */
export function assertSameId(field: string, bodyValue: string | null | undefined, pathValue: string): void {
  if (bodyValue && bodyValue.toLowerCase() !== pathValue.toLowerCase()) {
    throw DomainError.validation({ [field]: ['Must match the id in the path.'] }, `The body ${field} differs from the path.`);
  }
}
