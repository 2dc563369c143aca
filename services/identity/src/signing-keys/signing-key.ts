import { EntitySchema } from '@mikro-orm/postgresql';

/** An ES256 key pair identity signs tokens with; the private half is sealed at rest. */
export class SigningKey {
  kid!: string;
  privateKeySealed!: string;
  publicJwk!: Record<string, unknown>;
  createdAt: Date = new Date();
}

export const SigningKeySchema = new EntitySchema<SigningKey>({
  class: SigningKey,
  tableName: 'signing_keys',
  properties: {
    kid: { type: 'string', primary: true },
    privateKeySealed: { type: 'text' },
    publicJwk: { type: 'json' },
    createdAt: { type: 'Date', columnType: 'timestamptz' },
  },
});
