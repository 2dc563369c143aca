import { z } from 'zod';
import { BaseConfig, parseConfig } from '@billing/service-runtime/process';

const Flag = z.enum(['true', 'false', '1', '0']).transform((v) => v === 'true' || v === '1');

export const SandboxConfig = BaseConfig.extend({
  SANDBOX_PROVIDER_HOST: z.string().default('127.0.0.1'),
  SANDBOX_PROVIDER_PORT: z.coerce.number().int().min(0).max(65535).default(8090),
  /** Start "down": every /v1 call answers 503 until faults are cleared. */
  SANDBOX_FAULT_DOWN: Flag.default(false),
  /** Added delay on every /v1 call, to exercise callers' timeouts. */
  SANDBOX_LATENCY_MS: z.coerce.number().int().min(0).max(120_000).default(0),
  /** Largest request body the sandbox accepts (a charge or tokenisation is a few hundred bytes); larger is 413. */
  SANDBOX_BODY_LIMIT_BYTES: z.coerce.number().int().min(1024).max(16_777_216).default(65_536),
  /**
   * Serve the unauthenticated test endpoints `/__sandbox/faults` and `/__sandbox/ledger`: on by
   * default outside production mode, `false` turns them off; refused in production mode, where
   * anyone who reaches the provider could otherwise take it down.
   */
  SANDBOX_FAULTS_ENABLED: Flag.optional(),
  /** Where `file` keeps the ledger: `<DATA_DIR>/sandbox/ledger.jsonl`. */
  DATA_DIR: z.string().min(1).default('.data'),
  /**
   * `file`: tokens, charges, refunds and idempotent answers are kept in a journal under
   * DATA_DIR and read back at start, so a restart forgets nothing a caller relies on. `memory`:
   * forgotten at every restart.
   */
  SANDBOX_LEDGER: z.enum(['file', 'memory']).default('file'),
}).refine((c) => !(c.PLATFORM_MODE === 'production' && c.SANDBOX_FAULTS_ENABLED), {
  path: ['SANDBOX_FAULTS_ENABLED'],
  message: 'the unauthenticated /__sandbox endpoints are refused in production mode; unset SANDBOX_FAULTS_ENABLED or run the sandbox in development or test mode',
});
export type SandboxConfig = z.infer<typeof SandboxConfig>;

export function loadConfig(env = process.env): SandboxConfig {
  return parseConfig(SandboxConfig, env);
}
