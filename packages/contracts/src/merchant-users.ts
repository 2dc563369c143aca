import { z } from 'zod';
import { DateTime, NonBlankText, Email, nonBlankPassword, Uuid } from './common.js';

/** Ordered from least to most privileged; a role includes every role before it. */
export const MERCHANT_ROLES = ['Viewer', 'Staff', 'Admin', 'Owner'] as const;
export type MerchantRole = (typeof MERCHANT_ROLES)[number];

export function roleAtLeast(role: MerchantRole, needed: MerchantRole): boolean {
  return MERCHANT_ROLES.indexOf(role) >= MERCHANT_ROLES.indexOf(needed);
}

export const Password = nonBlankPassword(z.string().min(8, 'Must be at least 8 characters.').max(128, 'Must be at most 128 characters.'));

export const CreateMerchantUserRequest = z
  .object({
    email: Email,
    password: Password,
    fullName: NonBlankText(200),
    role: z.enum(MERCHANT_ROLES),
  })
  .meta({ id: 'CreateMerchantUserRequest' });
export type CreateMerchantUserRequest = z.infer<typeof CreateMerchantUserRequest>;

export const UpdateMerchantUserRequest = z
  // Absent or null: unchanged.
  .object({ isActive: z.boolean().nullish(), role: z.enum(MERCHANT_ROLES).nullish() })
  .meta({ id: 'UpdateMerchantUserRequest' });
export type UpdateMerchantUserRequest = z.infer<typeof UpdateMerchantUserRequest>;

export const MerchantUser = z
  .object({
    id: Uuid,
    merchantId: Uuid,
    email: z.string(),
    fullName: z.string(),
    role: z.enum(MERCHANT_ROLES),
    isActive: z.boolean(),
  })
  .meta({ id: 'MerchantUser' });
export type MerchantUser = z.infer<typeof MerchantUser>;

export const MerchantLoginRequest = z
  .object({
    email: z.email({ message: 'Must be a valid email address.' }).min(1, 'Required.').max(256, 'Must be at most 256 characters.'),
    password: nonBlankPassword(z.string().min(1).max(128)),
  })
  .meta({ id: 'MerchantLoginRequest' });
export type MerchantLoginRequest = z.infer<typeof MerchantLoginRequest>;

export const MerchantSignInResult = z
  .object({
    token: z.string().nullable(),
    expiresAt: DateTime,
    user: z.object({
      id: Uuid,
      merchantId: Uuid,
      email: z.string().nullable(),
      fullName: z.string().nullable(),
      role: z.enum(MERCHANT_ROLES),
    }),
  })
  .meta({ id: 'MerchantSignInResult' });
export type MerchantSignInResult = z.infer<typeof MerchantSignInResult>;
