import { describe, expect, it } from 'vitest';
import { z } from 'zod';
import { UpdateWebhookRequest } from './api-keys.js';
import { ResolveCheckoutLinkRequest } from './checkout.js';
import { CustomerLoginRequest, CustomerSignupRequest, ResetPasswordRequest } from './customers.js';
import { CreateMerchantUserRequest, MerchantLoginRequest } from './merchant-users.js';
import { GenerateFeeStatementRequest } from './fee-statements.js';
import { canonicalRetryOffsets, RetryOffsetsDays, UpdateMerchantRequest } from './merchants.js';
import { AddPaymentMethodRequest, holdsCardNumber } from './payment-methods.js';
import { UpdatePlanRequest } from './plans.js';
import { DateOrDateTime } from './subscriptions.js';
import { SaveOnboardingDetailsRequest } from './onboarding.js';
import { fieldErrorsOf } from './validation.js';

const ID = '11111111-1111-4111-8111-111111111111';
const errorsOf = (schema: z.ZodType, value: unknown) => {
  const r = schema.safeParse(value);
  expect(r.success).toBe(false);
  return fieldErrorsOf(r.error!);
};

describe('field errors', () => {
  it('name each failing field with each message once', () => {
    const twice = z.object({ name: z.string().min(1, 'Required.').refine((s) => s.trim() !== '', 'Required.') });
    expect(errorsOf(twice, { name: '' })).toEqual({ name: ['Required.'] });
  });

  it('say "Required." once for an empty or blank onboarding name', () => {
    expect(errorsOf(SaveOnboardingDetailsRequest, { invitationId: ID, firstName: '', lastName: 'Vite' })).toEqual({ firstName: ['Required.'] });
    expect(errorsOf(SaveOnboardingDetailsRequest, { invitationId: ID, firstName: 'Ada', lastName: '   ' })).toEqual({ lastName: ['Required.'] });
  });

  it('say "Required." of a missing field, whatever its type, and each bound in the API\'s words, unless the schema says otherwise', () => {
    expect(errorsOf(z.object({ s: z.string(), n: z.number(), e: z.enum(['A', 'B']), u: z.union([z.number(), z.string()]) }), {})).toEqual({
      s: ['Required.'],
      n: ['Required.'],
      e: ['Required.'],
      u: ['Required.'],
    });
    expect(errorsOf(z.object({ s: z.string() }), { s: 5 })).toEqual({ s: ['Invalid input: expected string, received number'] });
    expect(errorsOf(z.object({ s: z.string() }), { s: null })).toEqual({ s: ['Must not be null.'] });
    expect(errorsOf(z.object({ s: z.string().min(1).max(3), t: z.string().min(2) }), { s: 'abcd', t: 'a' })).toEqual({ s: ['Must be at most 3 characters.'], t: ['Must be at least 2 characters.'] });
    expect(errorsOf(z.object({ s: z.string().min(1) }), { s: '' })).toEqual({ s: ['Must not be empty.'] });
    expect(errorsOf(z.object({ n: z.number().int().min(1).max(30), a: z.array(z.string()).max(1) }), { n: 31, a: ['x', 'y'] })).toEqual({ n: ['Must be at most 30.'], a: ['Must have at most 1 item.'] });
    expect(errorsOf(z.object({ s: z.string('Must be text.') }), {})).toEqual({ s: ['Must be text.'] });
  });

  it('say what a date must be, how long a retry offset may be, and that a plan keeps its price', () => {
    expect(errorsOf(z.object({ startDate: DateOrDateTime }), { startDate: 'tomorrow' })).toEqual({ startDate: [expect.stringContaining('ISO 8601 date (YYYY-MM-DD) or date-time')] });
    expect(errorsOf(z.object({ d: RetryOffsetsDays }), { d: '100000' })).toEqual({ d: ['Each offset must be at most 999 days.'] });
    expect(errorsOf(z.object({ d: RetryOffsetsDays }), { d: 'a' })).toEqual({ d: ['Must be comma-separated whole days, e.g. "1,3,7".'] });
    expect(RetryOffsetsDays.safeParse('1, 3 ,7 ').success).toBe(true);
    expect(errorsOf(z.object({ d: RetryOffsetsDays }), { d: '1 3' })).toEqual({ d: ['Must be comma-separated whole days, e.g. "1,3,7".'] });
    expect(errorsOf(z.object({ d: RetryOffsetsDays }), { d: '3, 1' })).toEqual({ d: ['Offsets must be positive and strictly ascending.'] });
    expect(canonicalRetryOffsets(' 1, 3 ,07 ')).toBe('1,3,7');
    expect(Object.keys(errorsOf(UpdatePlanRequest, { amount: 99, currency: 'USD', name: 'P' })).sort()).toEqual(['amount', 'currency']);
    expect(UpdatePlanRequest.safeParse({ name: 'P', amount: null }).success).toBe(true);
  });

  it('refuse a merchant update that is not an object, or names a field it cannot change, by name', () => {
    for (const body of [null, [], 5, 'x']) expect(errorsOf(UpdateMerchantRequest, body)).toEqual({ $: ['Must be a JSON object.'] });
    expect(Object.keys(errorsOf(UpdateMerchantRequest, { name: 'N', isActive: false, gatewayPassword: 'pw' })).sort()).toEqual(['gatewayPassword', 'isActive']);
    expect(UpdateMerchantRequest.safeParse({ name: 'N', isActive: null, notAField: 1 }).data).toEqual({ name: 'N', isActive: null });
  });

  it('say "Required." for a missing field and name the type for a value of the wrong type', () => {
    expect(errorsOf(ResolveCheckoutLinkRequest, { s: 'x' })).toEqual({ d: ['Required.'] });
    expect(errorsOf(ResolveCheckoutLinkRequest, { d: 5, s: 'x' })).toEqual({ d: ['Must be a string.'] });
    expect(errorsOf(SaveOnboardingDetailsRequest, { invitationId: ID, firstName: 7, lastName: 'Vite' })).toEqual({ firstName: ['Must be a string.'] });
  });

  it('say that a webhook URL over 2048 characters is too long, not that it is not a URL', () => {
    const url = (n: number) => `https://example.com/${'a'.repeat(n - 'https://example.com/'.length)}`;
    expect(UpdateWebhookRequest.safeParse({ id: ID, merchantId: ID, webhookUrl: url(2048) }).success).toBe(true);
    expect(errorsOf(UpdateWebhookRequest, { id: ID, merchantId: ID, webhookUrl: url(2049) })).toEqual({ webhookUrl: ['Must be at most 2048 characters.'] });
    expect(errorsOf(UpdateWebhookRequest, { id: ID, merchantId: ID, webhookUrl: 'not a url' })).toEqual({ webhookUrl: ['Must be an absolute URL.'] });
  });

  it('refuse a password of whitespace alone, like every required text (contract §2)', () => {
    const blank = { password: ['Must contain a character other than whitespace.'] };
    const signup = { email: 'a@example.com', firstName: 'Ada', lastName: 'L', dateOfBirth: '1990-01-01' };
    expect(errorsOf(CustomerSignupRequest, { ...signup, password: ' '.repeat(8) })).toEqual(blank);
    expect(CustomerSignupRequest.safeParse({ ...signup, password: ' pass word ' }).success).toBe(true);
    expect(errorsOf(CustomerLoginRequest, { email: 'a@example.com', password: '\t ' })).toEqual(blank);
    expect(errorsOf(ResetPasswordRequest, { token: 'x'.repeat(43), newPassword: ' '.repeat(9) })).toEqual({ newPassword: blank.password });
    expect(errorsOf(CreateMerchantUserRequest, { email: 'o@example.com', password: ' '.repeat(9), fullName: 'O', role: 'Owner' })).toEqual(blank);
    expect(errorsOf(MerchantLoginRequest, { email: 'o@example.com', password: '  ' })).toEqual(blank);
  });

  it('take a fee statement currency in lower case, upper-cased, like a plan currency', () => {
    const period = { merchantId: ID, periodStart: '2030-01-01', periodEnd: '2030-02-01' };
    expect(GenerateFeeStatementRequest.parse({ ...period, currency: 'kwd' }).currency).toBe('KWD');
    expect(Object.keys(errorsOf(GenerateFeeStatementRequest, { ...period, currency: 'XXX' }))).toEqual(['currency']);
  });
});

describe('payment method details', () => {
  const card = { type: 'Card', last4: '4242', expiryMonth: 12, expiryYear: 2099 };
  const bank = { type: 'BankAccount', last4: '6789', accountName: 'Ada Lovelace', bsb: '062-000' };

  it('refuse a full card number put in brand or accountName, however it is spaced', () => {
    expect(holdsCardNumber('4242424242424242')).toBe(true);
    expect(holdsCardNumber('Visa 4242 4242 4242 4242')).toBe(true);
    expect(holdsCardNumber('3782-822463-10005')).toBe(true);
    expect(errorsOf(AddPaymentMethodRequest, { ...card, brand: 'Visa 4242 4242 4242 4242' })).toEqual({ brand: ['Must not hold a card number; send only its last4.'] });
    expect(errorsOf(AddPaymentMethodRequest, { ...bank, accountName: '4111111111111111' })).toEqual({ accountName: ['Must not hold a card number; send only its last4.'] });
  });

  it('take names and brands with digits that are not a card number', () => {
    for (const text of ['Visa', 'Mastercard 2 Series', 'Account 12345678', 'Ada 4242 4242', '4242424242424241', '12345678901234567890123']) expect(holdsCardNumber(text)).toBe(false);
    expect(AddPaymentMethodRequest.safeParse({ ...card, brand: 'Visa' }).success).toBe(true);
    expect(AddPaymentMethodRequest.safeParse({ ...bank, accountName: 'Ada Lovelace Trust 2024' }).success).toBe(true);
  });
});
