import { z } from 'zod';
import { DateTime, PageQuery, Uuid } from './common.js';

/** Invitation lifetime when `expiresInDays` is not given. */
export const DEFAULT_INVITATION_EXPIRY_DAYS = 7;

export const INVITATION_OUTCOMES = ['Ok', 'MerchantNotFound', 'NoDeliveryChannel'] as const;
export type InvitationOutcome = (typeof INVITATION_OUTCOMES)[number];

/**
 * Pending: sent, not yet accepted. Accepted: bound to a customer account, wizard under way.
 * Completed: the invitee became a member with a subscription. Revoked by the merchant. Expired:
 * past `expiresAt` without completing.
 */
export const INVITATION_STATUSES = ['Pending', 'Accepted', 'Completed', 'Revoked', 'Expired'] as const;
export type InvitationStatus = (typeof INVITATION_STATUSES)[number];

/**
 * Text stored exactly as sent: at least one non-whitespace character, `max` characters at most,
 * and on one line: a name is written into the invitation email the platform sends, where a line
 * break (or another control character) would let a merchant lay out text of its own under the
 * platform's name ("Hello Bob,\n\nSECURITY ALERT: ...").
 */
const onOneLine = (s: string) => !/[\p{Cc}\u2028\u2029]/u.test(s);
const ON_ONE_LINE = 'Must be on one line: no line breaks or other control characters.';

const Name = z
  .string('Must be a string.')
  .min(1, 'Required.')
  .max(100, 'Must be at most 100 characters.')
  .refine((s) => s.trim().length > 0, 'Must not be blank.')
  .refine(onOneLine, ON_ONE_LINE);

export const CreateInvitationRequest = z
  .object({
    merchantId: Uuid,
    firstName: Name,
    lastName: Name,
    email: z.email({ message: 'Must be a valid email address.' }).max(256, 'Must be at most 256 characters.').nullish(),
    // As sent, up to 50 characters: the format is the SMS provider's to judge, as a member's phone
    // is stored as sent. An empty string is no phone (as null); one of whitespace alone is 400,
    // not NoDeliveryChannel.
    phone: z
      .string('Must be a string.')
      .max(50, 'Must be at most 50 characters.')
      .refine((s) => s === '' || s.trim().length > 0, 'Must not be blank.')
      .refine(onOneLine, ON_ONE_LINE)
      .nullish(),
    expiresInDays: z.number('Must be a whole number.').int('Must be a whole number.').min(1, 'Must be between 1 and 90.').max(90, 'Must be between 1 and 90.').nullish(),
  })
  .superRefine((b, ctx) => {
    if (!b.email && !b.phone) {
      for (const path of ['email', 'phone']) ctx.addIssue({ code: 'custom', path: [path], message: 'Supply an email or a phone (at least one).' });
    }
  })
  .meta({
    id: 'CreateInvitationRequest',
    // The refinement above (an email or a phone, at least one), said in the document.
    anyOf: [
      { required: ['email'], properties: { email: { type: 'string' } } },
      { required: ['phone'], properties: { phone: { type: 'string', minLength: 1 } } },
    ],
  });
export type CreateInvitationRequest = z.infer<typeof CreateInvitationRequest>;

/** The answer to `POST /api/Invitations` (interface.md "Invitation result"). */
export const InvitationResult = z
  .object({
    outcome: z.enum(INVITATION_OUTCOMES),
    invitationId: Uuid.nullable(),
    token: z.string().nullable().meta({ description: 'Plaintext token, returned exactly once; only its SHA-256 is stored.' }),
    expiresAt: DateTime.nullable(),
    email: z.string().nullable(),
    phone: z.string().nullable(),
  })
  .meta({ id: 'InvitationResult' });
export type InvitationResult = z.infer<typeof InvitationResult>;

/** An invitation as the merchant sees it (never its token). */
export const Invitation = z
  .object({
    id: Uuid,
    merchantId: Uuid,
    firstName: z.string(),
    lastName: z.string(),
    email: z.string().nullable(),
    phone: z.string().nullable(),
    status: z.enum(INVITATION_STATUSES),
    expiresAt: DateTime,
    createdAt: DateTime,
    acceptedAt: DateTime.nullable(),
    completedAt: DateTime.nullable(),
    revokedAt: DateTime.nullable(),
    memberId: Uuid.nullable(),
    subscriptionId: Uuid.nullable(),
  })
  .meta({ id: 'Invitation' });
export type Invitation = z.infer<typeof Invitation>;

export const ListInvitationsQuery = PageQuery.extend({
  merchantId: Uuid.optional(),
  status: z.enum(INVITATION_STATUSES).optional(),
  /** The whole email, compared case-insensitively. */
  email: z.string().min(1).max(256).optional(),
});
