import http from 'node:http';
import https from 'node:https';
import { DomainError } from '@billing/contracts';
import { injectTraceHeaders, propagatesContextManually, spansSuppressed } from '@billing/telemetry';
import { ProviderRejected, type ChargeRequest, type ChargeResult, type PaymentProvider, type RefundRequest, type RefundResult, type TokenisedInstrument } from './payment-provider.js';

/** Header naming the merchant account a sandbox call is made for (like a provider's connected-account header). */
export const SANDBOX_ACCOUNT_HEADER = 'sandbox-account';

/** A provider answer: status and the parsed JSON body (null when it was not JSON). */
interface ProviderResponse {
  status: number;
  body: Record<string, unknown> | null;
}

/**
 * 4xx answers that say nothing final about the call: a timeout on the provider's side (408), an
 * idempotency-key conflict such as the first request with the key still in flight (409), too
 * early (425), rate limited (429). They stay `provider_unavailable`, like a 5xx.
 */
const TRANSIENT_4XX = new Set([408, 409, 425, 429]);

/** Errors of a kept-alive socket the server closed just as it was reused: the request never reached it. */
const STALE_SOCKET_CODES = new Set(['ECONNRESET', 'EPIPE']);

/**
 * HTTP client of the sandbox provider process (services/sandbox-provider). Each call has a
 * timeout (the whole call, queueing for a socket included); a connection failure, timeout or
 * 5xx becomes `provider_unavailable` (502 at the gateway), so callers can retry with backoff.
 * A charge or refund refused with a definitive 4xx is `ProviderRejected`.
 *
 * Connections are kept alive in a pool of at most `maxSockets`: a billing run makes thousands of
 * calls per second, and a connection per call would cost a TCP handshake each (and exhaust
 * ephemeral ports). A call whose reused connection the server had just closed is sent once more
 * on a new one, which is safe: it never reached the server.
 */
export class SandboxPaymentProvider implements PaymentProvider {
  private readonly agent: http.Agent;
  private readonly client: typeof http | typeof https;

  constructor(
    private readonly baseUrl: string,
    private readonly timeoutMs = 5000,
    maxSockets = 128,
  ) {
    this.client = new URL(baseUrl).protocol === 'https:' ? https : http;
    this.agent = new this.client.Agent({ keepAlive: true, maxSockets, maxFreeSockets: maxSockets });
  }

  /** Closes the pooled connections. */
  close(): void {
    this.agent.destroy();
  }

  async lookupToken(account: string, token: string): Promise<TokenisedInstrument | null> {
    const res = await this.call('GET', `/v1/tokens/${encodeURIComponent(token)}`, account);
    if (res.status === 404) return null;
    return toInstrument(ok(res));
  }

  async tokeniseBankAccount(account: string, details: { accountName: string; bsb: string; accountNumber: string }): Promise<TokenisedInstrument> {
    const res = await this.call('POST', '/v1/bank-tokens', account, details);
    if (res.status === 400) {
      const errors = (res.body?.errors as Record<string, string[]> | undefined) ?? { $: ['The provider refused the bank details.'] };
      throw DomainError.validation(errors);
    }
    return toInstrument(ok(res));
  }

  async charge(req: ChargeRequest): Promise<ChargeResult> {
    const res = await this.call('POST', '/v1/charges', req.account, {
      amountMinor: req.amountMinor,
      currency: req.currency,
      paymentMethod: { token: req.instrument.token ?? undefined, type: req.instrument.type, last4: req.instrument.last4 },
      description: req.description,
    }, req.idempotencyKey);
    return toCharge(ok(refusedForGood(res)));
  }

  async settle(account: string, providerChargeId: string): Promise<ChargeResult> {
    const res = await this.call('POST', `/v1/charges/${encodeURIComponent(providerChargeId)}/settle`, account, {});
    return toCharge(ok(res));
  }

  async refund(req: RefundRequest): Promise<RefundResult> {
    const res = await this.call('POST', '/v1/refunds', req.account, { chargeId: req.providerChargeId, amountMinor: req.amountMinor, currency: req.currency }, req.idempotencyKey);
    const body = ok(refusedForGood(res)) as { id: string; status: 'Settled' | 'Failed'; failureReason?: string | null };
    return { providerRefundId: body.id, status: body.status, failureReason: body.failureReason ?? null };
  }

  private async call(method: 'GET' | 'POST', path: string, account: string, body?: unknown, idempotencyKey?: string): Promise<ProviderResponse> {
    const headers: Record<string, string> = { [SANDBOX_ACCOUNT_HEADER]: account };
    const payload = body === undefined ? undefined : JSON.stringify(body);
    if (payload !== undefined) {
      headers['content-type'] = 'application/json';
      headers['content-length'] = String(Buffer.byteLength(payload));
    }
    if (idempotencyKey) headers['idempotency-key'] = idempotencyKey;
    const deadline = Date.now() + this.timeoutMs;
    let res: ProviderResponse;
    try {
      res = await this.send(method, new URL(path, this.baseUrl), headers, payload, deadline);
    } catch (e) {
      if ((e as Error).name === 'StaleSocket') res = await this.send(method, new URL(path, this.baseUrl), headers, payload, deadline).catch(unavailable);
      else unavailable(e);
    }
    if (res.status >= 500) throw new DomainError('provider_unavailable', `The payment provider failed (HTTP ${res.status}); retry with backoff.`);
    return res;
  }

  /** One HTTP exchange, failed with a `TimeoutError` past `deadline`, or a `StaleSocket` error (see the class comment). */
  private send(method: string, url: URL, headers: Record<string, string>, payload: string | undefined, deadline: number): Promise<ProviderResponse> {
    return new Promise((resolve, reject) => {
      // Through the HTTP instrumentation (a client span, which carries the trace context) only
      // while spans are recorded and not suppressed; otherwise the request bypasses it (it costs
      // more per call than the call itself) and the context, if any, goes in headers set here.
      const options: http.RequestOptions = { protocol: url.protocol, hostname: url.hostname, port: url.port, path: url.pathname + url.search, method, headers, agent: this.agent };
      const req =
        propagatesContextManually() || spansSuppressed() ? new http.ClientRequest({ ...options, headers: injectTraceHeaders({ ...headers }) }) : this.client.request(options);
      const timer = setTimeout(() => req.destroy(Object.assign(new Error('timeout'), { name: 'TimeoutError' })), Math.max(0, deadline - Date.now()));
      req.on('error', (e: NodeJS.ErrnoException) => {
        clearTimeout(timer);
        reject(req.reusedSocket && e.code && STALE_SOCKET_CODES.has(e.code) ? Object.assign(new Error(e.message), { name: 'StaleSocket' }) : e);
      });
      req.on('response', (res) => {
        const chunks: Buffer[] = [];
        res.on('data', (c: Buffer) => chunks.push(c));
        res.on('error', (e) => {
          clearTimeout(timer);
          reject(e);
        });
        res.on('end', () => {
          clearTimeout(timer);
          let parsed: Record<string, unknown> | null = null;
          try {
            parsed = JSON.parse(Buffer.concat(chunks).toString('utf8')) as Record<string, unknown>;
          } catch {
            parsed = null;
          }
          resolve({ status: res.statusCode ?? 0, body: parsed && typeof parsed === 'object' ? parsed : null });
        });
      });
      req.end(payload);
    });
  }
}

function unavailable(e: unknown): never {
  const timedOut = (e as Error | null)?.name === 'TimeoutError';
  throw new DomainError('provider_unavailable', timedOut ? 'The payment provider did not answer in time; retry with backoff.' : 'The payment provider could not be reached; retry with backoff.');
}

/** Throws `ProviderRejected` for a definitive 4xx (see `TRANSIENT_4XX`); passes anything else on. */
function refusedForGood(res: ProviderResponse): ProviderResponse {
  if (res.status >= 400 && res.status < 500 && !TRANSIENT_4XX.has(res.status)) throw new ProviderRejected(res.status, typeof res.body?.error === 'string' ? res.body.error : null);
  return res;
}

/** The body of a 2xx answer; anything else from the provider is provider_unavailable. */
function ok(res: ProviderResponse): Record<string, unknown> {
  if (res.status < 200 || res.status >= 300 || !res.body) throw new DomainError('provider_unavailable', `The payment provider gave an unexpected answer (HTTP ${res.status}).`);
  return res.body;
}

function toInstrument(b: Record<string, unknown>): TokenisedInstrument {
  return {
    token: String(b.token),
    type: b.type === 'BankAccount' ? 'BankAccount' : 'Card',
    brand: (b.brand as string | null | undefined) ?? null,
    last4: String(b.last4),
    expiryMonth: (b.expiryMonth as number | null | undefined) ?? null,
    expiryYear: (b.expiryYear as number | null | undefined) ?? null,
    accountName: (b.accountName as string | null | undefined) ?? null,
    bsb: (b.bsb as string | null | undefined) ?? null,
  };
}

function toCharge(b: Record<string, unknown>): ChargeResult {
  return { providerChargeId: String(b.id), status: b.status as ChargeResult['status'], failureReason: (b.failureReason as string | null | undefined) ?? null };
}
