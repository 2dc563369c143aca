import { z } from 'zod';
import { DateTime, Email, required, Uuid } from './common.js';

/** Outcomes of resolving a checkout deep link, in the order they are checked (contract §6). */
export const CHECKOUT_LINK_OUTCOMES = ['Ok', 'InvalidSignature', 'ApiKeyNotFound', 'MerchantMismatch', 'LinkExpired', 'NonceAlreadyUsed', 'PlanNotFound'] as const;
export type CheckoutLinkOutcome = (typeof CHECKOUT_LINK_OUTCOMES)[number];

/**
 * A required string with a non-whitespace character, kept exactly as sent; one message per
 * problem. Said as minLength 1 and a pattern (not a refinement) so the API reference shows it.
 */
const nonBlank = (max: number) =>
  z
    .string('Required.')
    .min(1, { message: 'Required.', abort: true })
    .max(max, `Must be at most ${max} characters.`)
    .regex(/\S/, 'Required.');

export const CheckoutCustomer = z
  .object({
    email: Email.nullish(),
    firstName: z.string().max(100).nullish(),
    lastName: z.string().max(100).nullish(),
    phone: z.string().max(50).nullish(),
  })
  .meta({ id: 'CheckoutCustomer' });

export const CreateCheckoutLinkRequest = z
  .object({
    merchantId: Uuid,
    planId: Uuid,
    returnUrl: z.string().min(1, 'Required.').max(2048),
    customer: CheckoutCustomer.nullish(),
    expiresInMinutes: z.number().int().min(1).max(10_080).nullish(),
    /** The key whose signing secret signs the link: required for a merchant user or the platform admin; an API key signs with itself. */
    apiKeyId: Uuid.nullish(),
  })
  .meta({ id: 'CreateCheckoutLinkRequest' });
export type CreateCheckoutLinkRequest = z.infer<typeof CreateCheckoutLinkRequest>;

export const CheckoutLink = z
  .object({ url: z.string(), d: z.string(), s: z.string(), expiresAt: DateTime })
  .meta({ id: 'CheckoutLink' });

export const ResolveCheckoutLinkRequest = z
  .object({ d: z.string(required()).min(1, 'Required.'), s: z.string(required()).min(1, 'Required.') })
  .meta({ id: 'ResolveCheckoutLinkRequest' });

/** Checkout deep-link result (interface.md). */
export const CheckoutDeepLinkResult = z
  .object({
    outcome: z.enum(CHECKOUT_LINK_OUTCOMES),
    sessionId: Uuid.nullable(),
    sessionToken: z.string().nullable(),
    expiresAt: DateTime.nullable(),
  })
  .meta({ id: 'CheckoutDeepLinkResult' });

export const CheckoutSessionView = z
  .object({
    sessionId: Uuid,
    merchantName: z.string(),
    plan: z.object({ name: z.string(), amount: z.number(), currency: z.string(), interval: z.string(), intervalCount: z.number().int() }),
    customer: z.object({ email: z.string().nullable(), firstName: z.string().nullable(), lastName: z.string().nullable(), phone: z.string().nullable() }),
    status: z.enum(['Open', 'Completed']),
    returnUrl: z.string(),
  })
  .meta({ id: 'CheckoutSession' });

export const UpdateCheckoutCustomerRequest = z
  .object({
    email: z.string(required()).pipe(Email),
    firstName: nonBlank(100),
    lastName: nonBlank(100),
    phone: z.string().max(50, 'Must be at most 50 characters.').nullish(),
  })
  .meta({ id: 'UpdateCheckoutCustomerRequest' });

/** Bank details: accountNumber is never stored, logged or echoed, not even in error messages. */
export const CaptureBankRequest = z
  .object({
    // Optional (the checkout-session token names the session); when sent it must be the token's session.
    sessionId: Uuid.nullish(),
    accountName: nonBlank(200),
    bsb: z.string(required()).min(1, 'Required.').max(10, 'Must be at most 10 characters.').regex(/^\d{3}-?\d{3}$/, 'Must be 6 digits, e.g. 062-000.'),
    accountNumber: z.string(required()).min(1, 'Required.').max(20, 'Must be at most 20 characters.').regex(/^\d{5,9}$/, 'Must be 5 to 9 digits.'),
  })
  .meta({ id: 'CaptureBankRequest' });

/** Bank capture result (interface.md). */
export const BankCaptureResult = z.object({ providerToken: z.string().nullable() }).meta({ id: 'BankCaptureResult' });

export const CompleteCheckoutRequest = z
  // An empty token is answered as an unknown one: a Failed completion result (interface.md), not a problem.
  .object({ sessionId: Uuid, providerToken: z.string(required()).max(128, 'Must be at most 128 characters.') })
  .meta({ id: 'CompleteCheckoutRequest' });

/** Checkout completion result (interface.md): 200 Completed, 400 or 409 Failed, 409 Pending. */
export const CheckoutCompletionResult = z
  .object({
    status: z.enum(['Completed', 'Failed', 'Pending']),
    returnUrl: z.string().nullable(),
    failureReason: z.string().nullable(),
    // Every error answer carries the request's trace id, this one too (not the 200).
    traceId: z.string().optional().meta({ description: 'On 400 and 409 only: the trace id of the request, as in problem details.' }),
    errors: z
      .record(z.string(), z.array(z.string()))
      .optional()
      .meta({ description: 'On a 400 for the request body itself (not valid JSON, a field failing its schema, a NUL character) only: each field at fault with its messages, as in a validation problem.' }),
  })
  .meta({ id: 'CheckoutCompletionResult' });
