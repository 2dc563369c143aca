import type { PaymentMethodType } from '@billing/contracts';

/**
 * The port to an external payment provider (a card and bank-debit gateway). Implementations:
 * `SandboxPaymentProvider` (the sandbox process, for Staging merchants); a real provider is
 * another implementation of this interface.
 *
 * Every call is made on behalf of one merchant account (`account`, the merchant id). Calls
 * that move money carry an idempotency key (the transaction id), so a retry after a timeout
 * never charges twice. An unreachable, failing or slow provider is a DomainError
 * `provider_unavailable` (outcome unknown: the call may have been acted on); declines are
 * results, not errors. A `charge` or `refund` the provider refuses for good (it did not act on
 * it) is a `ProviderRejected`.
 */
export interface PaymentProvider {
  /** What a token stands for; null when the provider does not know it for this account. */
  lookupToken(account: string, token: string): Promise<TokenisedInstrument | null>;
  /** Tokenises bank-account details; the account number goes to the provider and nowhere else. */
  tokeniseBankAccount(account: string, details: { accountName: string; bsb: string; accountNumber: string }): Promise<TokenisedInstrument>;
  charge(request: ChargeRequest): Promise<ChargeResult>;
  /** Final outcome of a `Processing` (bank) charge once its settlement window has passed. */
  settle(account: string, providerChargeId: string): Promise<ChargeResult>;
  refund(request: RefundRequest): Promise<RefundResult>;
}

/** `failureReason` of a charge or refund the provider refused for good (`ProviderRejected`). */
export const PROVIDER_REJECTED = 'provider_rejected';

/**
 * `failureReason` of a charge or refund whose merchant's environment had no payment provider
 * when its first call was to be made: nothing was sent to any provider, so nothing was charged
 * or refunded.
 */
export const PROVIDER_NOT_CONFIGURED = 'provider_not_configured';

/** Failure reason of a billing run's charge of a member with no payment method: nothing was sent. */
export const NO_PAYMENT_METHOD = 'no_payment_method';

/**
 * The provider refused a call and did not act on it: an answer that is neither a result nor a
 * sign of a transient condition (HTTP 4xx other than 408, 409, 425, 429: an unknown token, a
 * malformed request). Repeating the call would be refused again; nothing was charged or refunded.
 */
export class ProviderRejected extends Error {
  override readonly name = 'ProviderRejected';
  constructor(
    readonly httpStatus: number,
    /** The provider's own error code, when it sent one. */
    readonly providerCode: string | null,
  ) {
    super(`The payment provider refused the call (HTTP ${httpStatus}${providerCode ? `, ${providerCode}` : ''}).`);
  }
}

export interface TokenisedInstrument {
  token: string;
  type: PaymentMethodType;
  brand: string | null;
  last4: string;
  expiryMonth: number | null;
  expiryYear: number | null;
  accountName: string | null;
  bsb: string | null;
}

export interface ChargeRequest {
  account: string;
  /** The transaction id: a repeated call with the same key returns the first outcome. */
  idempotencyKey: string;
  amountMinor: number;
  currency: string;
  /** The instrument: by provider token when there is one, else by its tokenisation details. */
  instrument: { token?: string | null; type: PaymentMethodType; last4: string };
  description?: string;
}

export type ChargeStatus = 'Settled' | 'Processing' | 'Failed';

export interface ChargeResult {
  providerChargeId: string;
  status: ChargeStatus;
  /** Provider reason code when Failed, e.g. `card_declined`, `insufficient_funds`. */
  failureReason: string | null;
}

export interface RefundRequest {
  account: string;
  idempotencyKey: string;
  providerChargeId: string;
  amountMinor: number;
  currency: string;
}

export interface RefundResult {
  providerRefundId: string;
  status: 'Settled' | 'Failed';
  failureReason: string | null;
}
