import { z } from 'zod';

export const PlatformMode = z.enum(['development', 'test', 'production']);
export type PlatformMode = z.infer<typeof PlatformMode>;

/** Settings every service reads. */
export const BaseConfig = z.object({
  PLATFORM_MODE: PlatformMode.default('development'),
  LOG_LEVEL: z.enum(['fatal', 'error', 'warn', 'info', 'debug', 'trace', 'silent']).default('info'),
  /** Address of the operations listener (`/metrics`, `/health/live`, `/health/ready`). */
  METRICS_HOST: z.string().default('127.0.0.1'),
  /** Port of the operations listener; 0 picks a free one. */
  METRICS_PORT: z.coerce.number().int().min(0).max(65535).default(9464),
});

/**
 * Parses the environment once at start-up. On failure prints every problem and exits, so a
 * misconfigured process never half-starts.
 */
export function parseConfig<S extends z.ZodType>(schema: S, env: NodeJS.ProcessEnv = process.env): z.output<S> {
  const result = schema.safeParse(env);
  if (result.success) return result.data;
  const lines = result.error.issues.map((i) => `  ${i.path.join('.') || '(env)'}: ${i.message}`);
  process.stderr.write(`Invalid configuration:\n${lines.join('\n')}\n`);
  process.exit(78);
}

/**
 * A secret that must be set in production; in development and test a fixed, clearly-labelled
 * value is used so the platform starts with no setup.
 */
export function secretWithDevDefault(name: string, devDefault: string, min = 32) {
  return z
    .string()
    .min(min, `${name} must be at least ${min} characters`)
    .optional()
    .transform((v, ctx) => v ?? devDefault)
    .describe(name);
}

/** Rejects a dev-default secret when running in production mode. */
export function requireInProduction(mode: PlatformMode, values: Record<string, string | undefined>): void {
  if (mode !== 'production') return;
  const missing = Object.entries(values).filter(([name]) => !process.env[name]).map(([name]) => name);
  if (missing.length) {
    process.stderr.write(`Invalid configuration: ${missing.join(', ')} must be set in production mode\n`);
    process.exit(78);
  }
}
