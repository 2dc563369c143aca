import { setTimeout as sleep } from 'node:timers/promises';
import Fastify, { LogController, type FastifyBaseLogger, type FastifyInstance, type FastifyReply, type FastifyRequest } from 'fastify';
import { z } from 'zod';
import { createLogger, type Logger } from '@billing/service-runtime/process';
import type { SandboxConfig } from './config.js';
import { Faults } from './faults.js';
import { Ledger, SandboxError } from './ledger.js';

/** Header naming the merchant account a call is made for. */
export const ACCOUNT_HEADER = 'sandbox-account';

const Digits = (min: number, max: number) => z.string().trim().regex(new RegExp(`^\\d{${min},${max}}$`), `Must be ${min} to ${max} digits.`);

const CardTokenRequest = z.object({
  number: Digits(12, 19),
  expiryMonth: z.number().int().min(1).max(12),
  expiryYear: z.number().int().min(2000).max(2100),
  brand: z.string().trim().min(1).max(50).nullish(),
});

const BankTokenRequest = z.object({
  // Kept exactly as sent (never trimmed): the account name the platform stores and shows is the customer's.
  accountName: z.string().min(1).max(200).refine((v) => v.trim().length > 0, 'Required.'),
  bsb: z.string().trim().regex(/^\d{3}-?\d{3}$/, 'Must be a 6-digit BSB, e.g. 062-000.'),
  accountNumber: Digits(5, 9),
});

const ChargeRequest = z.object({
  amountMinor: z.number().int().positive(),
  currency: z.string().regex(/^[A-Z]{3}$/, 'Must be an ISO 4217 code.'),
  paymentMethod: z.object({
    token: z.string().min(1).nullish(),
    type: z.enum(['Card', 'BankAccount']).nullish(),
    last4: z.string().regex(/^\d{4}$/).nullish(),
  }),
  description: z.string().max(500).nullish(),
});

const RefundRequest = z.object({
  chargeId: z.string().min(1),
  amountMinor: z.number().int().positive(),
  currency: z.string().regex(/^[A-Z]{3}$/).nullish(),
});

const FaultRequest = z.object({
  down: z.boolean().optional(),
  dropConnections: z.boolean().optional(),
  latencyMs: z.number().int().min(0).max(120_000).optional(),
  failing: z.boolean().optional(),
  account: z.string().min(1).optional(),
});

function parse<S extends z.ZodType>(schema: S, value: unknown): z.output<S> {
  const r = schema.safeParse(value ?? {});
  if (r.success) return r.data;
  const errors: Record<string, string[]> = {};
  for (const issue of r.error.issues) (errors[issue.path.join('.') || '$'] ??= []).push(issue.message);
  throw new SandboxError(400, 'validation_failed', 'The request is invalid.', errors);
}

const accountOf = (req: FastifyRequest): string | null => {
  const v = req.headers[ACCOUNT_HEADER];
  return typeof v === 'string' && v.trim() ? v.trim().toLowerCase() : null;
};

function idempotencyKeyOf(req: FastifyRequest): string {
  const key = req.headers['idempotency-key'];
  if (typeof key !== 'string' || !key.trim() || key.length > 255) throw new SandboxError(400, 'idempotency_key_required', 'Send an Idempotency-Key header (1 to 255 characters).');
  return key;
}

export interface SandboxApp {
  app: FastifyInstance;
  logger: Logger;
  ledger: Ledger;
  faults: Faults;
}

/**
 * The sandbox payment provider: a stand-in for an external card and bank-debit gateway with
 * its own HTTP API, run as its own process, so callers meet the failure modes of a real one.
 */
export function buildSandbox(config: SandboxConfig, ledger = new Ledger(), logger: Logger = createLogger('sandbox-provider', config.LOG_LEVEL)): SandboxApp {
  const faults = new Faults({ down: config.SANDBOX_FAULT_DOWN, latencyMs: config.SANDBOX_LATENCY_MS });
  const app = Fastify({ loggerInstance: logger.child({ component: 'http' }) as unknown as FastifyBaseLogger, logController: new LogController({ disableRequestLogging: true }), bodyLimit: config.SANDBOX_BODY_LIMIT_BYTES });

  app.setErrorHandler((err, req, reply) => {
    if (err instanceof SandboxError) return reply.code(err.status).send({ error: err.code, message: err.message, errors: err.errors });
    const status = (err as { statusCode?: number }).statusCode;
    if (status && status >= 400 && status < 500) return reply.code(status).send({ error: 'bad_request', message: err instanceof Error ? err.message : 'Bad request.' });
    req.log.error({ err }, 'unhandled error');
    return reply.code(500).send({ error: 'internal', message: 'Internal error.' });
  });

  // Faults apply to the provider API only, never to health or the fault switch itself. Latency
  // is added once the request has fully arrived: a caller that gives up (or dies) meanwhile does
  // not stop the provider from acting on it, as with a real provider.
  app.addHook('preHandler', async (req: FastifyRequest) => {
    if (!req.url.startsWith('/v1/')) return;
    const fault = faults.for(accountOf(req));
    if (fault.latencyMs) await sleep(fault.latencyMs);
  });
  app.addHook('onRequest', async (req: FastifyRequest, reply: FastifyReply) => {
    if (!req.url.startsWith('/v1/')) return;
    const fault = faults.for(accountOf(req));
    if (fault.dropConnections) {
      reply.hijack();
      req.raw.socket.destroy();
      return;
    }
    if (fault.down) return reply.code(503).send({ error: 'unavailable', message: 'The sandbox provider is down (injected fault).' });
    if (fault.failing) return reply.code(500).send({ error: 'internal', message: 'The sandbox provider failed (injected fault).' });
  });

  // A provider call is answered only once what it changed is in the ledger's file (a replay too:
  // the first request's write may still be in flight), so no answer is about something a restart
  // would forget.
  app.addHook('onSend', async (req) => {
    if (req.url.startsWith('/v1/')) await ledger.written();
  });

  app.get('/health', async () => ({ status: 'ok' }));

  app.post('/v1/card-tokens', async (req, reply) => {
    const input = parse(CardTokenRequest, req.body);
    return reply.code(201).send(publicToken(ledger.tokeniseCard(accountOf(req), input)));
  });

  app.post('/v1/bank-tokens', async (req, reply) => {
    const input = parse(BankTokenRequest, req.body);
    return reply.code(201).send(publicToken(ledger.tokeniseBankAccount(accountOf(req), input)));
  });

  app.get<{ Params: { token: string } }>('/v1/tokens/:token', async (req, reply) => {
    const t = ledger.findToken(accountOf(req), req.params.token);
    if (!t) return reply.code(404).send({ error: 'token_not_found', message: 'No such token for this account.' });
    return publicToken(t);
  });

  app.post('/v1/charges', async (req, reply) => {
    const account = accountOf(req);
    const key = idempotencyKeyOf(req);
    const input = parse(ChargeRequest, req.body);
    const res = ledger.once(account, `charge:${key}`, input, () => ({ status: 201, body: ledger.charge(account, input, key) }));
    if (res.replayed) reply.header('idempotent-replayed', 'true');
    return reply.code(res.status).type('application/json; charset=utf-8').send(res.body);
  });

  app.get<{ Params: { id: string } }>('/v1/charges/:id', async (req) => ledger.findCharge(accountOf(req), req.params.id));

  app.post<{ Params: { id: string } }>('/v1/charges/:id/settle', async (req) => ledger.settle(accountOf(req), req.params.id));

  app.post('/v1/refunds', async (req, reply) => {
    const account = accountOf(req);
    const key = idempotencyKeyOf(req);
    const input = parse(RefundRequest, req.body);
    const res = ledger.once(account, `refund:${key}`, input, () => ({ status: 201, body: ledger.refund(account, { ...input, currency: input.currency ?? undefined }, key) }));
    if (res.replayed) reply.header('idempotent-replayed', 'true');
    return reply.code(res.status).type('application/json; charset=utf-8').send(res.body);
  });

  // Never in production mode (the config refuses SANDBOX_FAULTS_ENABLED there).
  if (config.PLATFORM_MODE !== 'production' && config.SANDBOX_FAULTS_ENABLED !== false) {
    // The ledger of one merchant account: every charge and refund the provider accepted, for tests to count.
    app.get<{ Querystring: { account?: string } }>('/__sandbox/ledger', async (req) => ledger.entries(req.query.account?.toLowerCase() ?? null));
    app.get('/__sandbox/faults', async () => faults.snapshot());
    app.post('/__sandbox/faults', async (req) => {
      const { account, ...change } = parse(FaultRequest, req.body);
      return faults.set(change, account?.toLowerCase());
    });
    app.delete<{ Querystring: { account?: string } }>('/__sandbox/faults', async (req, reply) => {
      faults.clear(req.query.account?.toLowerCase());
      return reply.code(204).send();
    });
  }

  return { app, logger, ledger, faults };
}

function publicToken(t: { token: string; type: string; brand: string | null; last4: string; expiryMonth: number | null; expiryYear: number | null; accountName: string | null; bsb: string | null }) {
  const { token, type, brand, last4, expiryMonth, expiryYear, accountName, bsb } = t;
  return { token, type, brand, last4, expiryMonth, expiryYear, accountName, bsb };
}
