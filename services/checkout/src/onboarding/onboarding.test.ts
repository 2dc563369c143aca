import { describe, expect, it } from 'vitest';
import { Onboarding } from './onboarding.js';

const TEXT = { id: 'a0000000-0000-4000-8000-000000000001', kind: 'Text', required: true, options: [] };
const SIZE = { id: 'a0000000-0000-4000-8000-000000000002', kind: 'SingleChoice', required: true, options: [{ id: 'b0000000-0000-4000-8000-000000000001' }, { id: 'b0000000-0000-4000-8000-000000000002' }] };

function answered(): Onboarding {
  return Object.assign(Onboarding.start('c0000000-0000-4000-8000-000000000001', 'd0000000-0000-4000-8000-000000000001'), {
    details: { firstName: 'Ada', lastName: 'King', phone: null, addressLine1: null, city: null, state: null, postCode: null, country: null },
    paymentMethod: { type: 'Card', brand: 'Visa', last4: '4242', expiryMonth: 12, expiryYear: 2099, accountName: null, bsb: null },
    planId: 'e0000000-0000-4000-8000-000000000001',
    productId: 'f0000000-0000-4000-8000-000000000001',
    answers: [{ questionId: TEXT.id, textValue: 'Fitness', optionIds: [] }],
  });
}

describe('Onboarding.step', () => {
  it('is Review when the saved answers satisfy the questions as they are now', () => {
    expect(answered().step([TEXT])).toBe('Review');
  });
  // Regression: the step only asked whether answers had been saved, so it read Review although completion refused them.
  it('is Questions when the saved answers no longer satisfy them: a required question added, or an answered question removed', () => {
    expect(answered().step([TEXT, SIZE])).toBe('Questions');
    expect(answered().step([SIZE])).toBe('Questions');
    expect(answered().step([TEXT, { ...SIZE, required: false }])).toBe('Review');
  });
  it("is Questions until answers are saved when the product has questions, optional ones too, and Review at once when it has none", () => {
    const unanswered = Object.assign(answered(), { answers: null });
    expect(unanswered.step([TEXT])).toBe('Questions');
    expect(unanswered.step([{ ...TEXT, required: false }])).toBe('Questions');
    expect(unanswered.step([])).toBe('Review');
  });
  it('is Plan when the chosen plan is no longer offered, whatever the answers', () => {
    expect(answered().step([TEXT], false)).toBe('Plan');
    expect(answered().step([TEXT, SIZE], false)).toBe('Plan');
  });
  it('is Done once completed, whatever the questions or the plan', () => {
    expect(Object.assign(answered(), { completedAt: new Date() }).step([TEXT, SIZE], false)).toBe('Done');
  });
});
