import { createHash } from 'node:crypto';
import { randomHex } from '@billing/telemetry';
import { Journal } from './journal.js';

/**
 * The sandbox provider's state: tokens, charges, refunds and the answers kept for
 * Idempotency-Keys, in memory and, when opened on a file (`Ledger.open`), in a journal there, so
 * a restarted sandbox still knows them as a real provider would: the tokens billing stores keep
 * charging, a Processing bank charge still settles, and a repeated request is answered as before,
 * not carried out again. Outcomes follow fixed test values,
 * like a real provider's test cards:
 * - Card with last4 `0002`: declined (`card_declined`); any other card: Settled at once.
 * - BankAccount: Processing; when settled, last4 ending `002` fails (`insufficient_funds`),
 *   any other settles.
 */

export type InstrumentType = 'Card' | 'BankAccount';

export interface Token {
  token: string;
  /** The merchant account that created it; null: usable by any account. */
  account: string | null;
  type: InstrumentType;
  brand: string | null;
  last4: string;
  expiryMonth: number | null;
  expiryYear: number | null;
  accountName: string | null;
  bsb: string | null;
  createdAt: string;
}

export type ChargeStatus = 'Settled' | 'Processing' | 'Failed';

export interface Charge {
  id: string;
  account: string | null;
  amountMinor: number;
  currency: string;
  paymentMethod: { token: string | null; type: InstrumentType; last4: string };
  status: ChargeStatus;
  failureReason: string | null;
  refundedMinor: number;
  description: string | null;
  /** The Idempotency-Key of the request that created it. */
  idempotencyKey: string | null;
  createdAt: string;
  settledAt: string | null;
}

export interface Refund {
  id: string;
  account: string | null;
  idempotencyKey: string | null;
  chargeId: string;
  amountMinor: number;
  currency: string;
  status: 'Settled';
  failureReason: null;
  createdAt: string;
}

/** A refused request: HTTP status and a machine-readable code. */
export class SandboxError extends Error {
  constructor(
    readonly status: number,
    readonly code: string,
    message: string,
    readonly errors?: Record<string, string[]>,
  ) {
    super(message);
  }
}

/** A new id: random bytes from a pool (`randomHex`); a `randomBytes` call per id was 7 % of the sandbox's CPU in a profiled writes run's retries row. */
const newId = (prefix: string) => `${prefix}_${randomHex(12)}`;

function cardBrand(number: string): string {
  if (number.startsWith('4')) return 'Visa';
  if (/^(5[1-5]|2[2-7])/.test(number)) return 'Mastercard';
  if (/^3[47]/.test(number)) return 'Amex';
  return 'Card';
}

interface StoredResponse {
  fingerprint: string;
  status: number;
  /** The response body as sent (JSON): what a replay sends, whatever the ledger's entries became since. */
  body: string;
}

/** One line of the journal: an item as it now is (a later line of the same item replaces it). */
type JournalEntry =
  | { token: Token }
  | { charge: Charge }
  | { refund: Refund }
  | { answer: StoredResponse & { slot: string } };

export class Ledger {
  private readonly tokens = new Map<string, Token>();
  private readonly charges = new Map<string, Charge>();
  private readonly refunds = new Map<string, Refund>();
  private readonly idempotent = new Map<string, StoredResponse>();
  private journal?: Journal;

  /**
   * The ledger kept in `file` (made if missing): what it holds is read back first. A failed write
   * to it calls `onWriteFailure` (the entries waiting on it were not kept; the caller should stop
   * the process, whose callers then get no answer and repeat their requests).
   */
  static async open(file: string, onWriteFailure: (e: unknown) => void): Promise<{ ledger: Ledger; entries: number; skipped: number }> {
    const ledger = new Ledger();
    const { journal, entries, skipped } = await Journal.open<JournalEntry>(file, (e) => ledger.replay(e), () => ledger.snapshot(), onWriteFailure);
    ledger.journal = journal;
    return { ledger, entries, skipped };
  }

  /** Resolves once every change made so far is in the journal (at once without one): the provider answers after it. */
  written(): Promise<void> {
    return this.journal?.written() ?? Promise.resolve();
  }

  async close(): Promise<void> {
    await this.journal?.close();
  }

  private replay(e: JournalEntry): void {
    if ('token' in e) this.tokens.set(e.token.token, e.token);
    else if ('charge' in e) this.charges.set(e.charge.id, e.charge);
    else if ('refund' in e) this.refunds.set(e.refund.id, e.refund);
    else if ('answer' in e) {
      const { slot, ...answer } = e.answer;
      this.idempotent.set(slot, answer);
    }
  }

  private *snapshot(): Iterable<JournalEntry> {
    for (const token of this.tokens.values()) yield { token };
    for (const charge of this.charges.values()) yield { charge };
    for (const refund of this.refunds.values()) yield { refund };
    for (const [slot, answer] of this.idempotent) yield { answer: { slot, ...answer } };
  }

  tokeniseCard(account: string | null, input: { number: string; expiryMonth: number; expiryYear: number; brand?: string | null }): Token {
    return this.store({
      token: newId('ctok'),
      account,
      type: 'Card',
      brand: input.brand ?? cardBrand(input.number),
      last4: input.number.slice(-4),
      expiryMonth: input.expiryMonth,
      expiryYear: input.expiryYear,
      accountName: null,
      bsb: null,
      createdAt: new Date().toISOString(),
    });
  }

  tokeniseBankAccount(account: string | null, input: { accountName: string; bsb: string; accountNumber: string }): Token {
    const digits = input.bsb.replace('-', '');
    return this.store({
      token: newId('btok'),
      account,
      type: 'BankAccount',
      brand: null,
      last4: input.accountNumber.slice(-4),
      expiryMonth: null,
      expiryYear: null,
      accountName: input.accountName,
      bsb: `${digits.slice(0, 3)}-${digits.slice(3)}`,
      createdAt: new Date().toISOString(),
    });
  }

  /** A token visible to `account`: its own, or one created without an account. */
  findToken(account: string | null, token: string): Token | undefined {
    const t = this.tokens.get(token);
    if (!t || (t.account !== null && t.account !== account)) return undefined;
    return t;
  }

  charge(account: string | null, input: { amountMinor: number; currency: string; paymentMethod: { token?: string | null; type?: InstrumentType | null; last4?: string | null }; description?: string | null }, idempotencyKey: string | null = null): Charge {
    let instrument: Charge['paymentMethod'];
    if (input.paymentMethod.token) {
      const t = this.findToken(account, input.paymentMethod.token);
      if (!t) throw new SandboxError(400, 'token_not_found', 'No such token for this account.', { 'paymentMethod.token': ['Unknown token.'] });
      instrument = { token: t.token, type: t.type, last4: t.last4 };
    } else {
      if (!input.paymentMethod.type || !input.paymentMethod.last4) {
        throw new SandboxError(400, 'validation_failed', 'paymentMethod needs a token, or a type and last4.', { paymentMethod: ['Send a token, or type and last4.'] });
      }
      instrument = { token: null, type: input.paymentMethod.type, last4: input.paymentMethod.last4 };
    }
    const now = new Date().toISOString();
    const charge: Charge = {
      id: newId('ch'),
      account,
      amountMinor: input.amountMinor,
      currency: input.currency,
      paymentMethod: instrument,
      status: 'Processing',
      failureReason: null,
      refundedMinor: 0,
      description: input.description ?? null,
      idempotencyKey,
      createdAt: now,
      settledAt: null,
    };
    if (instrument.type === 'Card') {
      if (instrument.last4 === '0002') Object.assign(charge, { status: 'Failed', failureReason: 'card_declined' });
      else Object.assign(charge, { status: 'Settled', settledAt: now });
    }
    this.charges.set(charge.id, charge);
    this.journal?.append({ charge });
    return charge;
  }

  findCharge(account: string | null, id: string): Charge {
    const c = this.charges.get(id);
    if (!c || (c.account !== null && c.account !== account)) throw new SandboxError(404, 'charge_not_found', 'No such charge for this account.');
    return c;
  }

  /** Ends the settlement window of a Processing bank charge; repeated calls return the outcome. */
  settle(account: string | null, id: string): Charge {
    const c = this.findCharge(account, id);
    if (c.status !== 'Processing') return c;
    if (c.paymentMethod.last4.endsWith('002')) Object.assign(c, { status: 'Failed', failureReason: 'insufficient_funds' });
    else Object.assign(c, { status: 'Settled', settledAt: new Date().toISOString() });
    this.journal?.append({ charge: c });
    return c;
  }

  refund(account: string | null, input: { chargeId: string; amountMinor: number; currency?: string }, idempotencyKey: string | null = null): Refund {
    const c = this.findCharge(account, input.chargeId);
    if (c.status !== 'Settled') throw new SandboxError(409, 'charge_not_settled', `Only a Settled charge can be refunded; this one is ${c.status}.`);
    if (input.currency && input.currency !== c.currency) throw new SandboxError(400, 'currency_mismatch', 'The refund currency differs from the charge.');
    if (c.refundedMinor + input.amountMinor > c.amountMinor) throw new SandboxError(409, 'refund_exceeds_charge', 'Refunds would exceed the charged amount.');
    c.refundedMinor += input.amountMinor;
    const refund: Refund = { id: newId('re'), account, idempotencyKey, chargeId: c.id, amountMinor: input.amountMinor, currency: c.currency, status: 'Settled', failureReason: null, createdAt: new Date().toISOString() };
    this.refunds.set(refund.id, refund);
    this.journal?.append({ charge: c });
    this.journal?.append({ refund });
    return refund;
  }

  /**
   * Runs `fn` once per (account, key): a repeat with the same request replays the first
   * response; with a different request it is refused (409). Failed attempts (4xx) are not kept.
   * The body comes back serialized (JSON), as it is stored for replays: serialized once, sent as is.
   */
  once(account: string | null, key: string, request: unknown, fn: () => { status: number; body: unknown }): { status: number; body: string; replayed: boolean } {
    const slot = `${account ?? ''}\u0000${key}`;
    const fingerprint = createHash('sha256').update(JSON.stringify(request)).digest('hex');
    const stored = this.idempotent.get(slot);
    if (stored) {
      if (stored.fingerprint !== fingerprint) throw new SandboxError(409, 'idempotency_key_reused', 'This Idempotency-Key was used with a different request.');
      return { status: stored.status, body: stored.body, replayed: true };
    }
    const result = fn();
    const body = JSON.stringify(result.body);
    this.idempotent.set(slot, { fingerprint, status: result.status, body });
    this.journal?.append({ answer: { slot, fingerprint, status: result.status, body } });
    return { status: result.status, body, replayed: false };
  }

  /** Every charge and refund of `account` (all accounts when null), oldest first. */
  entries(account: string | null): { charges: Charge[]; refunds: Refund[] } {
    const mine = <T extends { account: string | null }>(xs: Iterable<T>) => [...xs].filter((x) => account === null || x.account === account);
    return { charges: mine(this.charges.values()), refunds: mine(this.refunds.values()) };
  }

  private store(t: Token): Token {
    this.tokens.set(t.token, t);
    this.journal?.append({ token: t });
    return t;
  }
}
