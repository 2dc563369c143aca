import { describe, expect, it } from 'vitest';
import { z } from 'zod';
import { UpdateWebhookRequest } from './api-keys.js';
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

  it('say that a webhook URL over 2048 characters is too long, not that it is not a URL', () => {
    const url = (n: number) => `https://example.com/${'a'.repeat(n - 'https://example.com/'.length)}`;
    expect(UpdateWebhookRequest.safeParse({ id: ID, merchantId: ID, webhookUrl: url(2048) }).success).toBe(true);
    expect(errorsOf(UpdateWebhookRequest, { id: ID, merchantId: ID, webhookUrl: url(2049) })).toEqual({ webhookUrl: ['Must be at most 2048 characters.'] });
    expect(errorsOf(UpdateWebhookRequest, { id: ID, merchantId: ID, webhookUrl: 'not a url' })).toEqual({ webhookUrl: ['Must be an absolute URL.'] });
  });
});
