import type { Attributes, AttributeValue } from '@opentelemetry/api';
import type { ExportResult } from '@opentelemetry/core';
import type { ReadableSpan, SpanExporter } from '@opentelemetry/sdk-trace-base';

/**
 * What leaves a process in a span must not carry anything secret or personal, as no log line
 * does. The instrumentations record what they see: full URLs (the hosted pages' links carry
 * reset, verification and invitation tokens, checkout links `d` and `s`, list filters an
 * email), SQL as the ORM sends it (values inlined: emails, names, webhook URLs with their
 * tokens) and exception messages (a mail server's rejection names the recipient). So every span
 * is redacted on its way to an exporter:
 * - URL attributes lose their query string (`?` + `REDACTED`) and credentials in their path
 *   (payment-provider tokens, API keys, signing secrets: `[token]`);
 * - SQL statements lose their literals (quoted strings and numbers become `?`);
 * - in every string attribute and event attribute, email addresses become `[email]`.
 */

const URL_KEYS = new Set(['http.url', 'url.full', 'http.target', 'url.query', 'http.request.header.referer', 'server.url']);
const SQL_KEYS = new Set(['db.statement', 'db.query.text']);
const EMAIL = /[^\s@<>"'(),;:/?&=#]+@[^\s@<>"'(),;:/?&=#]+\.[^\s@<>"'(),;:/?&=#]+/g;
/** Quoted SQL literals ('…' with '' escapes, E'…' with backslash escapes) and bare numbers. */
const SQL_LITERAL = /\b[eE]'(?:[^'\\]|\\.|'')*'|'(?:[^']|'')*'|(?<![\w$.])\d+(?:\.\d+)?\b/g;

/** An email in a URL path, its `@` percent-encoded. */
const ENCODED_EMAIL = /[^\s@<>"'(),;:/?&=#]+%40[^\s@<>"'(),;:/?&=#]+\.[^\s@<>"'(),;:/?&=#]+/gi;

/**
 * A credential as a whole path segment: a payment provider's card or bank token (`ctok_…`,
 * `btok_…`, `tok_…`: billing looks one up at `/v1/tokens/<token>`, and whoever holds it can
 * attach that account to a member), an API key (`sk_…`) or a signing secret (`whsec_…`).
 */
const PATH_CREDENTIAL = /(?<=\/)(?:[a-z]{0,4}tok|sk|whsec)_[^/?#]+/gi;

export function redactUrl(value: string): string {
  const q = value.indexOf('?');
  const withoutQuery = q < 0 ? value : `${value.slice(0, q)}?REDACTED`;
  return withoutQuery.replace(EMAIL, '[email]').replace(ENCODED_EMAIL, '[email]').replace(PATH_CREDENTIAL, '[token]');
}

export function redactSql(value: string): string {
  return value.replace(SQL_LITERAL, '?');
}

function redactValue(key: string, value: AttributeValue | undefined): AttributeValue | undefined {
  if (typeof value !== 'string') {
    return Array.isArray(value) ? (value as unknown[]).map((v) => (typeof v === 'string' ? v.replace(EMAIL, '[email]') : v)) as AttributeValue : value;
  }
  if (key === 'url.query') return 'REDACTED';
  if (URL_KEYS.has(key)) return redactUrl(value);
  if (SQL_KEYS.has(key)) return redactSql(value).replace(EMAIL, '[email]');
  return value.replace(EMAIL, '[email]');
}

export function redactAttributes(attributes: Attributes): Attributes {
  const out: Attributes = {};
  for (const [k, v] of Object.entries(attributes)) out[k] = redactValue(k, v);
  return out;
}

/** The span as exporters see it, with its attributes and its events' attributes redacted. */
export function redactSpan(span: ReadableSpan): ReadableSpan {
  return Object.create(span, {
    name: { value: span.name.replace(EMAIL, '[email]') },
    attributes: { value: redactAttributes(span.attributes) },
    events: { value: span.events.map((e) => ({ ...e, attributes: e.attributes ? redactAttributes(e.attributes) : e.attributes })) },
    status: { value: span.status.message ? { ...span.status, message: span.status.message.replace(EMAIL, '[email]') } : span.status },
  }) as ReadableSpan;
}

/** Wraps an exporter so that every span it exports is redacted first (`redactSpan`). */
export class RedactingSpanExporter implements SpanExporter {
  constructor(private readonly inner: SpanExporter) {}

  export(spans: ReadableSpan[], resultCallback: (result: ExportResult) => void): void {
    this.inner.export(spans.map(redactSpan), resultCallback);
  }

  shutdown(): Promise<void> {
    return this.inner.shutdown();
  }

  forceFlush(): Promise<void> {
    return this.inner.forceFlush?.() ?? Promise.resolve();
  }
}
