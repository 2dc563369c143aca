import { z } from 'zod';
import { DateTime, NonBlankText, Uuid } from './common.js';

export const PAYMENT_METHOD_TYPES = ['Card', 'BankAccount'] as const;
export type PaymentMethodType = (typeof PAYMENT_METHOD_TYPES)[number];

/**
 * A member's stored instrument: the result of tokenisation, never a full card or account
 * number. `rank` 1 is the default; the biller tries methods in rank order.
 */
export const PaymentMethod = z
  .object({
    id: Uuid,
    merchantId: Uuid,
    memberId: Uuid,
    type: z.enum(PAYMENT_METHOD_TYPES),
    brand: z.string().nullable(),
    last4: z.string(),
    expiryMonth: z.number().int().nullable(),
    expiryYear: z.number().int().nullable(),
    accountName: z.string().nullable(),
    bsb: z.string().nullable(),
    rank: z.number().int(),
    isDefault: z.boolean(),
    createdAt: DateTime,
  })
  .meta({ id: 'PaymentMethod' });
export type PaymentMethod = z.infer<typeof PaymentMethod>;

/** Australian bank-state-branch number: six digits, optionally `123-456`; stored and returned as sent (contract §2). */
export const Bsb = z.string().regex(/^\d{3}-?\d{3}$/, 'Must be a 6-digit BSB, e.g. 062-000.');

export const Last4 = z.string().regex(/^\d{4}$/, 'Must be exactly 4 digits.');

/** Body fields that would carry full instrument numbers; refused outright, never stored or logged. */
export const FORBIDDEN_INSTRUMENT_FIELDS = ['cardNumber', 'number', 'pan', 'accountNumber', 'cvc', 'cvv', 'cvn', 'securityCode', 'card_number', 'account_number'] as const;

/** A field name as compared with `FORBIDDEN_INSTRUMENT_FIELDS`: lower-cased, without `_`, `-` or spaces. */
const instrumentFieldKey = (name: string): string => name.toLowerCase().replace(/[-_\s]/g, '');
const FORBIDDEN_INSTRUMENT_KEYS: ReadonlySet<string> = new Set(FORBIDDEN_INSTRUMENT_FIELDS.map(instrumentFieldKey));

/**
 * The fields of `body` that would carry a full number or security code, named as sent: any
 * spelling of `FORBIDDEN_INSTRUMENT_FIELDS` (`CardNumber`, `CARD_NUMBER`, `card-number`, `CVV`),
 * as clients serialise names in their own case.
 */
export function forbiddenInstrumentFields(body: Record<string, unknown>): string[] {
  return Object.keys(body).filter((field) => FORBIDDEN_INSTRUMENT_KEYS.has(instrumentFieldKey(field)));
}

const FULL_NUMBER_MESSAGE = 'Full card or account numbers and security codes must never be sent; send the tokenisation result (type, brand, last4) or use from-token.';

/**
 * Whether `text` holds what looks like a full card number: 13 to 19 digits in a row, spaces or
 * dashes allowed between them (as printed on a card), that pass the Luhn check. A form that put
 * the number in the wrong field (`brand`, `accountName`) would otherwise have it stored and shown.
 */
export function holdsCardNumber(text: string): boolean {
  return (text.match(/\d(?:[ -]?\d)+/g) ?? []).some((run) => {
    const digits = run.replace(/[ -]/g, '');
    return digits.length >= 13 && digits.length <= 19 && passesLuhn(digits);
  });
}

function passesLuhn(digits: string): boolean {
  let sum = 0;
  for (let i = 0; i < digits.length; i++) {
    let d = digits.charCodeAt(digits.length - 1 - i) - 48;
    if (i % 2 === 1) d = d * 2 > 9 ? d * 2 - 9 : d * 2;
    sum += d;
  }
  return sum % 10 === 0;
}

const CARD_NUMBER_IN_TEXT_MESSAGE = 'Must not hold a card number; send only its last4.';

/** Fields of a tokenisation result, shared by the payment-method endpoints and onboarding. */
export const paymentMethodDetailsShape = {
  type: z.enum(PAYMENT_METHOD_TYPES),
  brand: NonBlankText(50).nullish(),
  last4: Last4,
  expiryMonth: z.number().int('Must be a whole number.').min(1).max(12).nullish(),
  expiryYear: z.number().int('Must be a whole number.').min(2000).max(2100).nullish(),
  accountName: NonBlankText(200).nullish(),
  bsb: Bsb.nullish(),
};

/**
 * Cards need `expiryMonth` and `expiryYear` (not in the past) and carry no bank fields; bank
 * accounts need `accountName` and `bsb` and carry no expiry. Fields holding full numbers
 * (`cardNumber`, `accountNumber`, ...) are refused. `draft` (the onboarding wizard's saved step,
 * where only `type` is required): what is sent is checked, what is missing is not; completion
 * asks for it (`paymentMethodGaps`).
 */
export function checkPaymentMethodDetails(
  pm: { type: PaymentMethodType; expiryMonth?: number | null; expiryYear?: number | null; accountName?: string | null; bsb?: string | null } & Record<string, unknown>,
  ctx: z.RefinementCtx,
  now = new Date(),
  opts: { draft?: boolean } = {},
): void {
  for (const field of forbiddenInstrumentFields(pm)) ctx.addIssue({ code: 'custom', path: [field], message: FULL_NUMBER_MESSAGE });
  const issue = (path: string, message: string) => ctx.addIssue({ code: 'custom', path: [path], message });
  for (const field of ['brand', 'accountName'] as const) {
    const text = pm[field];
    if (typeof text === 'string' && holdsCardNumber(text)) issue(field, CARD_NUMBER_IN_TEXT_MESSAGE);
  }
  if (!opts.draft) for (const [field, message] of Object.entries(missingTypeFields(pm))) issue(field, message);
  if (pm.type === 'Card') {
    if (pm.accountName != null) issue('accountName', 'Only for a BankAccount.');
    if (pm.bsb != null) issue('bsb', 'Only for a BankAccount.');
    if (pm.expiryMonth != null && pm.expiryYear != null) {
      const expiry = pm.expiryYear * 12 + pm.expiryMonth;
      if (expiry < now.getUTCFullYear() * 12 + now.getUTCMonth() + 1) issue('expiryYear', 'The card has expired.');
    }
  } else {
    if (pm.expiryMonth != null) issue('expiryMonth', 'Only for a Card.');
    if (pm.expiryYear != null) issue('expiryYear', 'Only for a Card.');
  }
}

/** The fields its type requires that `pm` lacks (a Card's expiry, a BankAccount's name and BSB): field name to message. */
function missingTypeFields(pm: { type: PaymentMethodType; expiryMonth?: number | null; expiryYear?: number | null; accountName?: string | null; bsb?: string | null }): Record<string, string> {
  const missing: Record<string, string> = {};
  if (pm.type === 'Card') {
    if (pm.expiryMonth == null) missing.expiryMonth = 'Required for a Card.';
    if (pm.expiryYear == null) missing.expiryYear = 'Required for a Card.';
  } else {
    if (pm.accountName == null) missing.accountName = 'Required for a BankAccount.';
    if (pm.bsb == null) missing.bsb = 'Required for a BankAccount.';
  }
  return missing;
}

/**
 * What a saved (draft) payment method still lacks before a member's payment method can be made
 * of it: field name to message, empty when it is complete.
 */
export function paymentMethodGaps(pm: { type: PaymentMethodType; last4?: string | null; expiryMonth?: number | null; expiryYear?: number | null; accountName?: string | null; bsb?: string | null }): Record<string, string> {
  return { ...(pm.last4 == null || pm.last4 === '' ? { last4: 'Required.' } : {}), ...missingTypeFields(pm) };
}

export const AddPaymentMethodRequest = z
  .looseObject({ merchantId: Uuid.nullish(), memberId: Uuid.nullish(), ...paymentMethodDetailsShape })
  .superRefine((pm, ctx) => checkPaymentMethodDetails(pm, ctx))
  .meta({
    id: 'AddPaymentMethodRequest',
    // What the refinement above requires by type, said in the document (a client generated from it, or reading the schema, sends them).
    allOf: [
      { if: { properties: { type: { const: 'Card' } }, required: ['type'] }, then: { required: ['expiryMonth', 'expiryYear'], properties: { expiryMonth: { type: 'integer' }, expiryYear: { type: 'integer' } } } },
      { if: { properties: { type: { const: 'BankAccount' } }, required: ['type'] }, then: { required: ['accountName', 'bsb'], properties: { accountName: { type: 'string' }, bsb: { type: 'string' } } } },
    ],
  });
export type AddPaymentMethodRequest = z.infer<typeof AddPaymentMethodRequest>;

export const AddPaymentMethodFromTokenRequest = z
  .object({
    merchantId: Uuid.nullish(),
    memberId: Uuid.nullish(),
    providerToken: z.string().trim().min(1, 'Must not be empty.').max(200),
  })
  .meta({ id: 'AddPaymentMethodFromTokenRequest' });
export type AddPaymentMethodFromTokenRequest = z.infer<typeof AddPaymentMethodFromTokenRequest>;

/** The member's full set of method ids in the new order; the first becomes the default. */
export const ReorderPaymentMethodsRequest = z
  .object({
    memberId: Uuid.nullish(),
    merchantId: Uuid.nullish(),
    orderedIds: z.array(Uuid).max(1000).nullish(),
  })
  .meta({ id: 'ReorderPaymentMethodsRequest' });
export type ReorderPaymentMethodsRequest = z.infer<typeof ReorderPaymentMethodsRequest>;

/** Payload (`data`) of `payment_method.added`: the new method. */
export const PaymentMethodAddedEvent = PaymentMethod.meta({ id: 'PaymentMethodAddedEvent' });
export type PaymentMethodAddedEvent = z.infer<typeof PaymentMethodAddedEvent>;
