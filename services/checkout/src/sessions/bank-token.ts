import { EntitySchema } from '@mikro-orm/postgresql';

/**
 * A bank account captured for a session: the provider's token and what may be shown. The
 * account number is not here, by design; it went to the provider and nowhere else.
 */
export class BankToken {
  token!: string;
  sessionId!: string;
  merchantId!: string;
  accountName!: string;
  bsb!: string;
  last4!: string;
  createdAt: Date = new Date();
}

export const BankTokenSchema = new EntitySchema<BankToken>({
  class: BankToken,
  tableName: 'bank_tokens',
  properties: {
    token: { type: 'string', primary: true },
    sessionId: { type: 'uuid' },
    merchantId: { type: 'uuid' },
    accountName: { type: 'string' },
    bsb: { type: 'string' },
    last4: { type: 'string' },
    createdAt: { type: 'Date', columnType: 'timestamptz' },
  },
});
