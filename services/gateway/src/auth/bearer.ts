/**
 * The credential of an `Authorization` header, or undefined. The scheme must be exactly
 * `Bearer` followed by exactly one space and a non-empty token without whitespace.
 */
export function parseBearer(header: string | undefined): string | undefined {
  if (!header || !header.startsWith('Bearer ')) return undefined;
  const token = header.slice(7);
  return token.length > 0 && !/\s/.test(token) ? token : undefined;
}
