import { existsSync, mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { join, resolve } from 'node:path';
import { describe, expect, it } from 'vitest';
import { z } from 'zod';
import { EVENT_TYPES } from './event-types.js';
import { EventEnvelope } from './events.js';
import { EVENT_VERSIONS, WEBHOOK_EVENT_DATA } from './webhook-events.js';

/**
 * Events cross independently deployed services, so their schemas only evolve compatibly.
 * `event-schemas/<type>.json` records the JSON Schema of every version of each type's `data`.
 * The current schema must equal the recorded one of its current version (a change without a
 * new version, or an unrecorded version, fails: record it with UPDATE_EVENT_SCHEMAS=1), and
 * each version must still give old consumers everything they read: no property removed or
 * retyped, nothing optional that was required. (A consumer of a new version sees old events
 * too; adding a required field therefore needs the consumer to default it.)
 */
const DIR = resolve(import.meta.dirname, '../event-schemas');
type Schema = { properties?: Record<string, Schema>; required?: string[]; type?: string | string[]; anyOf?: Schema[]; $ref?: string; [k: string]: unknown };

const jsonOf = (type: (typeof EVENT_TYPES)[number]) => {
  const { $schema: _s, ...json } = z.toJSONSchema(WEBHOOK_EVENT_DATA[type], { unrepresentable: 'any', io: 'output', target: 'draft-2020-12' }) as Schema;
  return JSON.parse(JSON.stringify(json, (k, v) => (k === 'id' || k === '$id' ? undefined : v))) as Schema;
};

/** The JSON types a schema admits (anyOf flattened); undefined when unconstrained. */
function typesOf(s: Schema): string[] | undefined {
  if (s.anyOf) return s.anyOf.flatMap((a) => typesOf(a) ?? ['any']);
  if (s.type) return ([] as string[]).concat(s.type);
  if ('const' in s) return [typeof s.const];
  if (s.enum) return ['enum'];
  return undefined;
}

/** Why `next` breaks consumers of `prev`, if it does. */
function incompatibilities(prev: Schema, next: Schema, path = '$'): string[] {
  const out: string[] = [];
  for (const [name, p] of Object.entries(prev.properties ?? {})) {
    const n = next.properties?.[name];
    const at = `${path}.${name}`;
    if (!n) {
      out.push(`${at} was removed`);
      continue;
    }
    const [pt, nt] = [typesOf(p), typesOf(n)];
    if (pt && nt && nt.some((t) => !pt.includes(t))) out.push(`${at} changed type from ${pt.join('|')} to ${nt.join('|')}`);
    if (p.enum && n.enum && (n.enum as unknown[]).some((v) => !(p.enum as unknown[]).includes(v))) out.push(`${at} gained enum values consumers do not know`);
    if ((prev.required ?? []).includes(name) && !(next.required ?? []).includes(name)) out.push(`${at} is no longer required`);
    if (p.properties || n.properties) out.push(...incompatibilities(p, n, at));
  }
  return out;
}

describe('event schemas', () => {
  it.each(EVENT_TYPES)('%s: its current schema is recorded under its version, and every version is compatible with the one before', (type) => {
    const file = join(DIR, `${type}.json`);
    const recorded: Record<string, Schema> = existsSync(file) ? JSON.parse(readFileSync(file, 'utf8')) : {};
    const version = String(EVENT_VERSIONS[type]);
    const current = jsonOf(type);
    if (process.env.UPDATE_EVENT_SCHEMAS === '1' && JSON.stringify(recorded[version]) !== JSON.stringify(current)) {
      mkdirSync(DIR, { recursive: true });
      writeFileSync(file, `${JSON.stringify({ ...recorded, [version]: current }, null, 2)}\n`);
      recorded[version] = current;
    }
    expect(recorded[version], `event-schemas/${type}.json has no version ${version}, or it differs: bump EVENT_VERSIONS or run with UPDATE_EVENT_SCHEMAS=1`).toEqual(current);
    const versions = Object.keys(recorded).map(Number).sort((a, b) => a - b);
    expect(versions.at(-1)).toBe(EVENT_VERSIONS[type]);
    for (let i = 1; i < versions.length; i++) expect(incompatibilities(recorded[versions[i - 1]!]!, recorded[versions[i]!]!), `${type} v${versions[i]}`).toEqual([]);
  });

  it('finds what breaks a consumer: a removed, retyped or no longer required field', () => {
    const v1: Schema = { type: 'object', properties: { id: { type: 'string' }, amount: { type: 'number' }, note: { type: 'string' } }, required: ['id', 'amount'] };
    expect(incompatibilities(v1, { ...v1, properties: { ...v1.properties, extra: { type: 'string' } } })).toEqual([]);
    expect(incompatibilities(v1, { ...v1, properties: { id: { type: 'string' }, note: { type: 'string' } } })).toEqual(['$.amount was removed']);
    expect(incompatibilities(v1, { ...v1, properties: { ...v1.properties, amount: { type: 'string' } } })).toEqual(['$.amount changed type from number to string']);
    expect(incompatibilities(v1, { ...v1, required: ['id'] })).toEqual(['$.amount is no longer required']);
  });

  it('reads an envelope published before versions existed as version 1', () => {
    const old = { id: '6f1c2d3e-4a5b-4c6d-8e7f-8091a2b3c4d5', type: 'member.created', occurredAt: '2026-11-01T00:00:00.000Z', merchantId: '3f0e8a52-9c4b-4d7e-8a1f-6b2c9d4e5f01', data: {} };
    expect(EventEnvelope.parse(old).version).toBe(1);
  });
});
