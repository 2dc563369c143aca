import { readdirSync, readFileSync } from 'node:fs';
import { join, resolve } from 'node:path';
import { OutboxRelayEnv } from '@billing/service-runtime';
import { describe, expect, it } from 'vitest';
import type { z } from 'zod';

/**
 * The README's "Environment variables" tables are the operators' list of settings: every
 * variable a service's config schema parses, and every one the code, launcher, bench or test
 * harness reads from the environment, is there; every variable a table names is read somewhere.
 * (OUTBOX_COALESCE_MS, the sandbox's fault switches, PROTO_ROOT and bench variables were read
 * and undocumented while nothing compared the two.)
 */
const root = resolve(import.meta.dirname, '../..');
const readme = readFileSync(join(root, 'README.md'), 'utf8');

/** Read from the environment but not settings of this platform, with why. */
const NOT_SETTINGS: Record<string, string> = {
  PATH: "the system's search path (binaries are looked up on it)",
  SERVICE: 'set by the Dockerfile to the one service its image holds',
  ECHO_GRPC_ADDRESS: "set by bench/merchants-me.bench.mjs for its baseline's child processes",
  ECHO_TLS_DIR: "set by bench/merchants-me.bench.mjs for its baseline's child processes",
};

/** Documented but read by a library, not by this repository's code. */
const READ_BY_LIBRARIES = /^OTEL_/;

/** The tables of the "Environment variables" section: variable names in the cell that names them. */
function documentedVariables(): Set<string> {
  const start = readme.indexOf('\n## Environment variables');
  const end = readme.indexOf('\n## ', start + 1);
  expect(start).toBeGreaterThan(0);
  const names = new Set<string>();
  for (const line of readme.slice(start, end).split('\n')) {
    if (!line.startsWith('|') || /^\|\s*-/.test(line)) continue;
    const cell = line.split('|').slice(1).find((c) => c.includes('`'));
    for (const m of cell?.matchAll(/`([A-Z][A-Z0-9_]+)`/g) ?? []) names.add(m[1]!);
  }
  return names;
}

function sourceFiles(dir: string): string[] {
  return readdirSync(join(root, dir), { recursive: true, encoding: 'utf8' })
    .filter((f) => /\.(ts|mjs|cjs|js)$/.test(f) && !/(^|\/)(node_modules|dist|\.data)\//.test(f))
    .map((f) => join(root, dir, f));
}

/** Variables the code and tests read: `process.env.X`, `env.X` (the launcher's and harness's copies), `envVar: 'X'`. */
function variablesRead(): Map<string, string> {
  const read = new Map<string, string>();
  const dirs = ['scripts', 'bench', 'tests', ...['packages', 'services'].flatMap((d) => readdirSync(join(root, d)).map((n) => `${d}/${n}/src`))];
  for (const file of dirs.flatMap(sourceFiles)) {
    const text = readFileSync(file, 'utf8');
    for (const m of text.matchAll(/\b(?:process\.)?env(?:\.([A-Z][A-Z0-9_]+)|\[\s*['"]([A-Z][A-Z0-9_]+)['"]\s*\])|envVar:\s*'([A-Z][A-Z0-9_]+)'/g)) {
      const name = (m[1] ?? m[2] ?? m[3])!;
      if (!read.has(name)) read.set(name, file.slice(root.length + 1));
    }
  }
  return read;
}

/** Every key of every config schema a service parses its environment with. */
async function configKeys(): Promise<Map<string, string>> {
  const keys = new Map<string, string>();
  const add = (schema: z.ZodObject, where: string) => {
    for (const key of Object.keys(schema.shape)) if (!keys.has(key)) keys.set(key, where);
  };
  for (const service of readdirSync(join(root, 'services'))) {
    const module = (await import(join(root, 'services', service, 'src/config.ts'))) as Record<string, unknown>;
    const schemas = Object.entries(module).filter(([, v]) => typeof v === 'object' && v !== null && 'shape' in v);
    expect(schemas.length, `services/${service}/src/config.ts exports its config schema`).toBeGreaterThan(0);
    for (const [name, schema] of schemas) add(schema as z.ZodObject, `services/${service}/src/config.ts ${name}`);
  }
  add(OutboxRelayEnv, 'packages/service-runtime/src/outbox-relay.ts OutboxRelayEnv');
  return keys;
}

describe('README environment variables', () => {
  const documented = documentedVariables();

  it('documents every key of every service config schema', async () => {
    const keys = await configKeys();
    expect(keys.size).toBeGreaterThan(80);
    const missing = [...keys].filter(([key]) => !documented.has(key)).map(([key, where]) => `${key} (${where})`);
    expect(missing).toEqual([]);
  });

  it('documents every variable the code, launcher, bench and test harness read', () => {
    const read = variablesRead();
    expect(read.size).toBeGreaterThan(30);
    const missing = [...read].filter(([name]) => !documented.has(name) && !(name in NOT_SETTINGS)).map(([name, file]) => `${name} (${file})`);
    expect(missing).toEqual([]);
  });

  it('documents only variables something reads', async () => {
    const keys = await configKeys();
    const read = variablesRead();
    const deploy = ['Dockerfile', 'docker-compose.yml'].map((f) => readFileSync(join(root, f), 'utf8')).join('\n');
    const unread = [...documented].filter((name) => !keys.has(name) && !read.has(name) && !READ_BY_LIBRARIES.test(name) && !new RegExp(`\\$\\{?${name}\\b`).test(deploy));
    expect(unread).toEqual([]);
  });

  it('lists each variable in one row per service, not twice with different defaults', () => {
    const start = readme.indexOf('\n## Environment variables');
    const seen = new Map<string, number>();
    let table = '';
    for (const row of readme.slice(start, readme.indexOf('\n## ', start + 1)).split('\n')) {
      if (row.startsWith('### ')) table = row;
      if (!row.startsWith('|')) continue;
      const cells = row.split('|').slice(1);
      const at = cells.findIndex((c) => c.includes('`'));
      // The launcher's table and the services' may both list a variable (the launcher passes it on).
      const scope = `${table}|${cells.slice(0, Math.max(0, at)).join('|').trim()}`;
      for (const m of cells[at]?.matchAll(/`([A-Z][A-Z0-9_]+)`/g) ?? []) {
        const key = `${scope}|${m[1]}`;
        seen.set(key, (seen.get(key) ?? 0) + 1);
      }
    }
    expect([...seen].filter(([, n]) => n > 1).map(([k]) => k)).toEqual([]);
  });
});
