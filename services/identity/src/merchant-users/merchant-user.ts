import { randomUUID } from 'node:crypto';
import { EntitySchema } from '@mikro-orm/postgresql';
import type { MerchantRole } from '@billing/contracts';

export class MerchantUser {
  id: string = randomUUID();
  merchantId!: string;
  /** Exactly as sent; unique across all merchant users compared case-insensitively (a unique index on `lower(email)`; see `byEmail`). */
  email!: string;
  passwordHash!: string;
  fullName!: string;
  role!: MerchantRole;
  isActive = true;
  createdAt: Date = new Date();
  updatedAt: Date = new Date();

  static create(props: { merchantId: string; email: string; passwordHash: string; fullName: string; role: MerchantRole }): MerchantUser {
    return Object.assign(new MerchantUser(), props);
  }

  /** Whether `change` makes this active Owner a user who can no longer manage the merchant's users. */
  removesOwner(change: { isActive?: boolean; role?: MerchantRole }): boolean {
    const owner = (isActive: boolean, role: MerchantRole) => isActive && role === 'Owner';
    return owner(this.isActive, this.role) && !owner(change.isActive ?? this.isActive, change.role ?? this.role);
  }

  /** Returns whether the change ends (true) or restores (false) the user's tokens, if it does either. */
  update(change: { isActive?: boolean; role?: MerchantRole }): 'revoked' | 'restored' | undefined {
    let effect: 'revoked' | 'restored' | undefined;
    if (change.isActive !== undefined && change.isActive !== this.isActive) {
      effect = change.isActive ? 'restored' : 'revoked';
      this.isActive = change.isActive;
    }
    if (change.role !== undefined && change.role !== this.role) {
      this.role = change.role;
      // The role is a claim of issued tokens; a change must not leave old tokens more powerful.
      effect ??= 'revoked';
    }
    this.updatedAt = new Date();
    return effect;
  }

  toView() {
    return { id: this.id, merchantId: this.merchantId, email: this.email, fullName: this.fullName, role: this.role, isActive: this.isActive };
  }
}

export const MerchantUserSchema = new EntitySchema<MerchantUser>({
  class: MerchantUser,
  tableName: 'merchant_users',
  properties: {
    id: { type: 'uuid', primary: true },
    merchantId: { type: 'uuid' },
    // Unique on lower(email), an expression index the migrations make.
    email: { type: 'string' },
    passwordHash: { type: 'text' },
    fullName: { type: 'string' },
    role: { type: 'string' },
    isActive: { type: 'boolean' },
    createdAt: { type: 'Date', columnType: 'timestamptz' },
    updatedAt: { type: 'Date', columnType: 'timestamptz' },
  },
});
