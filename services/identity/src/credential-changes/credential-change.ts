import { EntitySchema } from '@mikro-orm/postgresql';

export type CredentialKind = 'api_key' | 'merchant_user' | 'customer';

/**
 * One entry of the feed verifiers (the gateway) poll to learn that a credential stopped or
 * started being valid. Written in the same transaction as the change it records.
 */
export class CredentialChange {
  cursor?: string;
  kind!: CredentialKind;
  subjectId!: string;
  revoked!: boolean;
  at: Date = new Date();

  static of(kind: CredentialKind, subjectId: string, revoked: boolean): CredentialChange {
    return Object.assign(new CredentialChange(), { kind, subjectId, revoked });
  }
}

export const CredentialChangeSchema = new EntitySchema<CredentialChange>({
  class: CredentialChange,
  tableName: 'credential_changes',
  properties: {
    cursor: { type: 'bigint', primary: true, autoincrement: true },
    kind: { type: 'string' },
    subjectId: { type: 'uuid' },
    revoked: { type: 'boolean' },
    at: { type: 'Date', columnType: 'timestamptz' },
  },
});
