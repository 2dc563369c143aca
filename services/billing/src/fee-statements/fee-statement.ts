import { randomBytes, randomUUID } from 'node:crypto';
import { BigIntType, EntitySchema } from '@mikro-orm/postgresql';
import { DomainError } from '@billing/contracts';

export type FeeStatementStatus = 'Draft' | 'Finalised' | 'Paid';
export type FeeStatementEventType = 'fee_statement.finalised' | 'fee_statement.paid';

/** Totals of a statement's lines, in minor units. */
export interface LineTotals {
  totalFeesMinor: number;
  totalNetMinor: number;
  transactionCount: number;
}

/**
 * What the platform bills a merchant for its transactions in `[periodStart, periodEnd)`.
 *
 *   Draft ──finalise──▶ Finalised ──pay──▶ Paid
 *
 * Its lines are taken from the transactions when generated and again when finalised; from then
 * on they never change. The totals are always the sums of the lines (set from them, never apart).
 */
export class FeeStatement {
  id: string = randomUUID();
  merchantId!: string;
  reference!: string;
  periodStart!: Date;
  periodEnd!: Date;
  status: FeeStatementStatus = 'Draft';
  currency = 'AUD';
  totalFeesMinor = 0;
  totalNetMinor = 0;
  transactionCount = 0;
  finalisedAt: Date | null = null;
  paidAt: Date | null = null;
  paymentReference: string | null = null;
  notes: string | null = null;
  createdAt: Date = new Date();
  updatedAt: Date = new Date();

  private pending?: FeeStatementEventType[];

  static generate(input: { merchantId: string; periodStart: Date; periodEnd: Date; currency: string }, now = new Date()): FeeStatement {
    if (input.periodEnd <= input.periodStart) throw DomainError.field('periodEnd', 'Must be after periodStart.');
    const s = Object.assign(new FeeStatement(), input, { createdAt: now, updatedAt: now });
    s.reference = `FS-${input.periodStart.toISOString().slice(0, 10).replace(/-/g, '')}-${randomBytes(4).toString('hex').toUpperCase()}`;
    return s;
  }

  /** Lines may be (re)taken only while Draft, and as part of finalising. */
  assertLinesOpen(): void {
    if (this.status !== 'Draft') throw new DomainError('invalid_transition', `The lines of a ${this.status} statement are final.`);
  }

  setTotals(t: LineTotals, now = new Date()): void {
    this.assertLinesOpen();
    Object.assign(this, t, { updatedAt: now });
  }

  finalise(now = new Date()): void {
    if (this.status !== 'Draft') throw new DomainError('invalid_transition', `Only a Draft statement can be finalised; this one is ${this.status}.`);
    this.status = 'Finalised';
    this.finalisedAt = now;
    this.updatedAt = now;
    this.record('fee_statement.finalised');
  }

  /** Records the merchant's out-of-band settlement of a Finalised statement. */
  pay(input: { paymentReference?: string | null; notes?: string | null }, now = new Date()): void {
    if (this.status !== 'Finalised') throw new DomainError('invalid_transition', `Only a Finalised statement can be paid; this one is ${this.status}.`);
    this.status = 'Paid';
    this.paidAt = now;
    this.paymentReference = input.paymentReference ?? null;
    this.notes = input.notes ?? null;
    this.updatedAt = now;
    this.record('fee_statement.paid');
  }

  pullEvents(): FeeStatementEventType[] {
    const e = this.pending ?? [];
    this.pending = [];
    return e;
  }

  private record(e: FeeStatementEventType): void {
    (this.pending ??= []).push(e);
  }

  toMessage() {
    return {
      id: this.id,
      merchantId: this.merchantId,
      reference: this.reference,
      periodStart: this.periodStart.toISOString(),
      periodEnd: this.periodEnd.toISOString(),
      status: this.status,
      totalFeesMinor: Number(this.totalFeesMinor),
      totalNetMinor: Number(this.totalNetMinor),
      transactionCount: this.transactionCount,
      currency: this.currency,
      finalisedAt: this.finalisedAt?.toISOString(),
      paidAt: this.paidAt?.toISOString(),
      createdAt: this.createdAt.toISOString(),
      paymentReference: this.paymentReference ?? undefined,
      notes: this.notes ?? undefined,
    };
  }
}

export const FeeStatementSchema = new EntitySchema<FeeStatement>({
  class: FeeStatement,
  tableName: 'fee_statements',
  properties: {
    id: { type: 'uuid', primary: true },
    merchantId: { type: 'uuid' },
    reference: { type: 'string' },
    periodStart: { type: 'Date', columnType: 'timestamptz' },
    periodEnd: { type: 'Date', columnType: 'timestamptz' },
    status: { type: 'string' },
    currency: { type: 'string', columnType: 'char(3)' },
    totalFeesMinor: { type: new BigIntType('number') },
    totalNetMinor: { type: new BigIntType('number') },
    transactionCount: { type: 'integer' },
    finalisedAt: { type: 'Date', columnType: 'timestamptz', nullable: true },
    paidAt: { type: 'Date', columnType: 'timestamptz', nullable: true },
    paymentReference: { type: 'string', nullable: true },
    notes: { type: 'string', nullable: true },
    createdAt: { type: 'Date', columnType: 'timestamptz' },
    updatedAt: { type: 'Date', columnType: 'timestamptz' },
  },
});
