import { DateOrDateTime, DomainError, parseOrThrow } from '@billing/contracts';

/** An ISO 8601 date (00:00 UTC) or date-time from a request field; null when absent. */
export function parseInstant(field: string, value: string | null | undefined): Date | null {
  if (!value) return null;
  const text = parseOrThrow(DateOrDateTime, value) as string;
  const date = new Date(/^\d{4}-\d{2}-\d{2}$/.test(text) ? `${text}T00:00:00Z` : text);
  if (Number.isNaN(date.getTime())) throw DomainError.field(field, 'Must be an ISO 8601 date or date-time.');
  return date;
}
