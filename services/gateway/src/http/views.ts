import { DomainError } from '@billing/contracts';

/** Proto messages omit absent optional fields; REST bodies show them as null. */
export function nullFill<T>(msg: Record<string, unknown>, fields: readonly string[]): T {
  const out: Record<string, unknown> = {};
  for (const f of fields) out[f] = msg[f] ?? null;
  return out as T;
}

/** A body id that differs from the path id is a 400: the path identifies the resource. */
export function assertSameId(field: string, bodyValue: string | null | undefined, pathValue: string): void {
  if (bodyValue && bodyValue.toLowerCase() !== pathValue.toLowerCase()) {
    throw DomainError.validation({ [field]: ['Must match the id in the path.'] }, `The body ${field} differs from the path.`);
  }
}
