import { describe, expect, it } from 'vitest';
import { BasicTracerProvider, InMemorySpanExporter, SimpleSpanProcessor } from '@opentelemetry/sdk-trace-base';
import { redactSql, redactUrl, RedactingSpanExporter } from './redaction.js';

describe('span redaction', () => {
  it('drops query strings and emails from URLs', () => {
    expect(redactUrl('http://127.0.0.1:8080/reset-password?token=abc123')).toBe('http://127.0.0.1:8080/reset-password?REDACTED');
    expect(redactUrl('/nonexistent/a.b@example.com?apikey=x')).toBe('/nonexistent/[email]?REDACTED');
    expect(redactUrl('/nowhere/ann.b%40example.com')).toBe('/nowhere/[email]');
    expect(redactUrl('/api/Members/1f0e')).toBe('/api/Members/1f0e');
  });

  it('drops payment-provider tokens and other credentials from URL paths', () => {
    // billing's lookup of a bank token at the provider put the token, which attaches that bank
    // account to a member, in the client and server spans' http.url and http.target.
    expect(redactUrl('http://127.0.0.1:8090/v1/tokens/btok_583bcf3804cd12906ba79be2')).toBe('http://127.0.0.1:8090/v1/tokens/[token]');
    expect(redactUrl('/v1/tokens/ctok_abc?x=1')).toBe('/v1/tokens/[token]?REDACTED');
    expect(redactUrl('/v1/tokens/tok_abc/details')).toBe('/v1/tokens/[token]/details');
    expect(redactUrl('/keys/sk_DSD_raJA-ZAIwEB_Yjx')).toBe('/keys/[token]');
    expect(redactUrl('/v1/charges/ch_123/settle')).toBe('/v1/charges/ch_123/settle');
    expect(redactUrl('/api/stock_levels')).toBe('/api/stock_levels');
  });

  it('replaces SQL literals, keeping placeholders and identifiers', () => {
    expect(redactSql(`select c0.* from "identity"."customers" as c0 where lower(c0.email) = 'ann@example.com' limit 1`)).toBe(
      `select c0.* from "identity"."customers" as c0 where lower(c0.email) = ? limit ?`,
    );
    expect(redactSql(`update t set url = 'http://h/hook?t=it''s', n = 12.5 where id = $1`)).toBe(`update t set url = ?, n = ? where id = $1`);
    expect(redactSql(`insert into x values (E'a\\'b', 3)`)).toBe(`insert into x values (?, ?)`);
  });

  it('exports spans with URL, SQL, event and other attributes redacted', async () => {
    const inner = new InMemorySpanExporter();
    const provider = new BasicTracerProvider({ spanProcessors: [new SimpleSpanProcessor(new RedactingSpanExporter(inner))] });
    const span = provider.getTracer('t').startSpan('GET');
    span.setAttributes({
      'http.url': 'http://h/onboard?token=secret-token',
      'url.query': 'token=secret-token',
      'db.statement': `insert into password_reset_sends values ('ann@example.com', 5)`,
      'error.detail': 'rejected <ann@example.com>',
      'http.status_code': 200,
    });
    span.recordException(new Error("Can't send mail: 550 <ann@example.com>: Recipient address rejected"));
    span.end();
    await provider.forceFlush();
    const [exported] = inner.getFinishedSpans();
    expect(exported!.attributes).toEqual({
      'http.url': 'http://h/onboard?REDACTED',
      'url.query': 'REDACTED',
      'db.statement': 'insert into password_reset_sends values (?, ?)',
      'error.detail': 'rejected <[email]>',
      'http.status_code': 200,
    });
    expect(JSON.stringify(exported!.events)).not.toContain('ann@example.com');
    expect(JSON.stringify(exported!.events)).toContain('[email]');
    // The span itself is unchanged for anything else that reads it.
    expect(exported!.spanContext().traceId).toMatch(/^[0-9a-f]{32}$/);
    expect(exported!.name).toBe('GET');
  });
});
