import { DomainError, fieldPath } from '@billing/contracts';
import { describe, expect, it } from 'vitest';
import { assertParseableDepth, assertStorableText, assertUtf8Query, decodeUtf8Body, MAX_FIELDS_NAMED } from './input-policy.js';

function fieldsOf(fn: () => void): string[] {
  try {
    fn();
  } catch (e) {
    expect(e).toBeInstanceOf(DomainError);
    return Object.keys((e as DomainError).extensions.errors ?? {});
  }
  return [];
}

describe('input policy', () => {
  it('names a NUL at any depth of the body by its camelCase JSON path', () => {
    expect(fieldsOf(() => assertStorableText({ body: { customer: { email: 'a\u0000@x' }, items: [{ name: 'ok' }, { name: '\u0000' }] } }))).toEqual(['customer.email', 'items[1].name']);
  });

  it('names a NUL in a query value by its parameter', () => {
    expect(fieldsOf(() => assertStorableText({ query: { email: 'x\u0000' } }))).toEqual(['email']);
  });

  it('refuses lone surrogates but keeps paired ones and whitespace as sent', () => {
    expect(fieldsOf(() => assertStorableText({ body: { a: 'x\ud800', b: '\udc00y', c: '😀', d: '  padded  ' } }))).toEqual(['a', 'b']);
  });

  it('decodes valid UTF-8 (including a genuine U+FFFD) and names the field holding invalid bytes', () => {
    expect(decodeUtf8Body(Buffer.from('{"a":"caf\u00e9 \ufffd"}'))).toBe('{"a":"caf\u00e9 \ufffd"}');
    const bad = Buffer.concat([Buffer.from('{"ok":"\ufffd","name":"x'), Buffer.from([0xff]), Buffer.from('"}')]);
    expect(fieldsOf(() => decodeUtf8Body(bad))).toEqual(['name']);
    expect(fieldsOf(() => decodeUtf8Body(Buffer.from([0x7b, 0xff])))).toEqual(['$']);
  });

  it('refuses a body nested deeper than the limit, where it went too deep, without exhausting the stack', () => {
    const nested = (depth: number): unknown => JSON.parse(`${'['.repeat(depth)}"x"${']'.repeat(depth)}`);
    expect(fieldsOf(() => assertStorableText({ body: { a: { b: [1] } } }, 3))).toEqual([]);
    expect(fieldsOf(() => assertStorableText({ body: { a: { b: [[1]] } } }, 3))).toEqual(['a.b[0]']);
    expect(fieldsOf(() => assertStorableText({ body: nested(20_000) }))).toEqual([fieldPath(Array(32).fill(0))]);
    const invalidDeep = Buffer.concat([Buffer.from('['.repeat(20_000) + '"'), Buffer.from([0xff]), Buffer.from('"' + ']'.repeat(20_000))]);
    expect(fieldsOf(() => decodeUtf8Body(invalidDeep))).toEqual(['$']);
  });

  it('refuses percent-encoded bytes in the query that are not UTF-8', () => {
    expect(fieldsOf(() => assertUtf8Query('/api/x?email=%FF'))).toEqual(['email']);
    expect(fieldsOf(() => assertUtf8Query('/api/x?email=caf%C3%A9'))).toEqual([]);
  });
});

describe('bounded refusals (probe: megabyte answers, a body of nested brackets parsed in full)', () => {
  it('names at most MAX_FIELDS_NAMED fields however many hold unstorable text', () => {
    const body = Object.fromEntries(Array.from({ length: 60_000 }, (_, i) => [`f${i}`, 'a\u0000b']));
    expect(fieldsOf(() => assertStorableText({ body }))).toHaveLength(MAX_FIELDS_NAMED);
  });

  it('names at most MAX_FIELDS_NAMED fields of a body that is not UTF-8, and stops scanning for them', () => {
    const fields = Array.from({ length: 60_000 }, (_, i) => `"f${i}":"\ufffd${i}"`).join(',');
    const raw = Buffer.concat([Buffer.from(`{${fields},"bad":"`), Buffer.from([0xff]), Buffer.from('"}')]);
    const named = fieldsOf(() => decodeUtf8Body(raw));
    expect(named.length).toBeGreaterThan(0);
    expect(named.length).toBeLessThanOrEqual(MAX_FIELDS_NAMED);
  });

  it('refuses a text nested far deeper than any body before parsing it, and names a moderately deep one where it went too deep', () => {
    expect(() => assertParseableDepth(`${'['.repeat(500_000)}${']'.repeat(500_000)}`)).toThrow(/nested too deep/);
    expect(() => assertParseableDepth(`{"a":"[[[[[[","b":${'['.repeat(40)}${']'.repeat(40)}}`)).not.toThrow();
    // Brackets inside strings (and escaped quotes) are not nesting.
    expect(() => assertParseableDepth(JSON.stringify({ s: `\\"${'['.repeat(5000)}` }))).not.toThrow();
  });
});
