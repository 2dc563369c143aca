import { describe, expect, it } from 'vitest';
import type { z } from 'zod';
import { BillingConfig } from '../../services/billing/src/config.js';
import { CheckoutConfig } from '../../services/checkout/src/config.js';
import { GatewayConfig } from '../../services/gateway/src/config.js';
import { IdentityConfig } from '../../services/identity/src/config.js';
import { WebhooksConfig } from '../../services/webhooks/src/config.js';

/**
 * A DATABASE_URL that is not a PostgreSQL URL naming a database passed every service's config
 * check and ended the start-up in MikroORM's stack trace ("No database specified, `clientUrl`
 * option provided but it's missing the pathname"). It is refused with the other configuration
 * errors ("Invalid configuration", exit 78), in a line that never repeats the value (it may
 * hold the password).
 */
const SERVICES: Record<string, z.ZodType> = { billing: BillingConfig, checkout: CheckoutConfig, gateway: GatewayConfig, identity: IdentityConfig, webhooks: WebhooksConfig };
const problems = (schema: z.ZodType, env: Record<string, string>) => {
  const r = schema.safeParse({ PLATFORM_MODE: 'test', ...env });
  return r.success ? [] : r.error.issues.filter((i) => i.path[0] === 'DATABASE_URL').map((i) => i.message);
};

describe.each(Object.entries(SERVICES))('%s DATABASE_URL', (_name, schema) => {
  it('accepts postgres:// and postgresql:// URLs naming a database', () => {
    expect(problems(schema, { DATABASE_URL: 'postgres://u:p@db:5432/billing' })).toEqual([]);
    expect(problems(schema, { DATABASE_URL: 'postgresql://db/billing?sslmode=require' })).toEqual([]);
  });

  it('refuses anything else in one line that does not repeat it', () => {
    for (const bad of ['notaurl', 'mysql://u:s3cret@db/billing', 'postgres://u:s3cret@db:5432', 'postgres://u:s3cret@db:5432/']) {
      const found = problems(schema, { DATABASE_URL: bad });
      expect(found, bad).toHaveLength(1);
      expect(found[0]).toMatch(/^must be a PostgreSQL URL naming its database/);
      expect(found[0]).not.toContain('s3cret');
    }
  });

  it('says it is required when missing', () => {
    expect(problems(schema, {})).toEqual(['is required']);
  });
});
