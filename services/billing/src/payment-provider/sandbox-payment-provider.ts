import { DomainError } from '@billing/contracts';
import type { ChargeRequest, ChargeResult, PaymentProvider, RefundRequest, RefundResult, TokenisedInstrument } from './payment-provider.js';

/** Header naming the merchant account a sandbox call is made for (like a provider's connected-account header). */
export const SANDBOX_ACCOUNT_HEADER = 'sandbox-account';

/**
 * HTTP client of the sandbox provider process (services/sandbox-provider). Each call has a
 * timeout; a connection failure, timeout or 5xx becomes `provider_unavailable` (502 at the
 * gateway), so callers can retry with backoff.
 */
export class SandboxPaymentProvider implements PaymentProvider {
  constructor(
    private readonly baseUrl: string,
    private readonly timeoutMs = 5000,
  ) {}

  async lookupToken(account: string, token: string): Promise<TokenisedInstrument | null> {
    const res = await this.call('GET', `/v1/tokens/${encodeURIComponent(token)}`, account);
    if (res.status === 404) return null;
    return toInstrument(await this.json(res));
  }

  async tokeniseBankAccount(account: string, details: { accountName: string; bsb: string; accountNumber: string }): Promise<TokenisedInstrument> {
    const res = await this.call('POST', '/v1/bank-tokens', account, details);
    if (res.status === 400) {
      const body = (await res.json().catch(() => ({}))) as { errors?: Record<string, string[]> };
      throw DomainError.validation(body.errors ?? { $: ['The provider refused the bank details.'] });
    }
    return toInstrument(await this.json(res));
  }

  async charge(req: ChargeRequest): Promise<ChargeResult> {
    const res = await this.call('POST', '/v1/charges', req.account, {
      amountMinor: req.amountMinor,
      currency: req.currency,
      paymentMethod: { token: req.instrument.token ?? undefined, type: req.instrument.type, last4: req.instrument.last4 },
      description: req.description,
    }, req.idempotencyKey);
    return toCharge(await this.json(res));
  }

  async settle(account: string, providerChargeId: string): Promise<ChargeResult> {
    const res = await this.call('POST', `/v1/charges/${encodeURIComponent(providerChargeId)}/settle`, account, {});
    return toCharge(await this.json(res));
  }

  async refund(req: RefundRequest): Promise<RefundResult> {
    const res = await this.call('POST', '/v1/refunds', req.account, { chargeId: req.providerChargeId, amountMinor: req.amountMinor, currency: req.currency }, req.idempotencyKey);
    const body = (await this.json(res)) as { id: string; status: 'Settled' | 'Failed'; failureReason?: string | null };
    return { providerRefundId: body.id, status: body.status, failureReason: body.failureReason ?? null };
  }

  private async call(method: 'GET' | 'POST', path: string, account: string, body?: unknown, idempotencyKey?: string): Promise<Response> {
    const headers: Record<string, string> = { [SANDBOX_ACCOUNT_HEADER]: account };
    if (body !== undefined) headers['content-type'] = 'application/json';
    if (idempotencyKey) headers['idempotency-key'] = idempotencyKey;
    let res: Response;
    try {
      res = await fetch(new URL(path, this.baseUrl), { method, headers, body: body === undefined ? undefined : JSON.stringify(body), signal: AbortSignal.timeout(this.timeoutMs) });
    } catch (e) {
      const timedOut = e instanceof DOMException && e.name === 'TimeoutError';
      throw new DomainError('provider_unavailable', timedOut ? 'The payment provider did not answer in time; retry with backoff.' : 'The payment provider could not be reached; retry with backoff.');
    }
    if (res.status >= 500) {
      await res.body?.cancel();
      throw new DomainError('provider_unavailable', `The payment provider failed (HTTP ${res.status}); retry with backoff.`);
    }
    return res;
  }

  private async json(res: Response): Promise<Record<string, unknown>> {
    const body = (await res.json().catch(() => null)) as Record<string, unknown> | null;
    if (!res.ok || !body) throw new DomainError('provider_unavailable', `The payment provider gave an unexpected answer (HTTP ${res.status}).`);
    return body;
  }
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
