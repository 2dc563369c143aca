import { expect } from 'vitest';
import { CARD, setUpMerchant, type TestMerchant } from './billing-fixtures.js';
import { unique, type ApiClient } from './fixtures.js';
import { tokenFromLink, waitForMessage } from './mailbox.js';

export const PASSWORD = 'correct-horse-42';

/** A merchant with a plan whose product asks a required text, a required single choice and an optional multi choice. */
export interface OnboardingMerchant extends TestMerchant {
  questions: { text: { id: string }; single: { id: string; options: { id: string; label: string }[] }; multi: { id: string; options: { id: string; label: string }[] } };
}

export async function setUpOnboardingMerchant(api: ApiClient, adminToken: string): Promise<OnboardingMerchant> {
  const m = await setUpMerchant(api, adminToken);
  const q = async (body: Record<string, unknown>) => {
    const res = await api.post(`/api/Products/${m.productId}/questions`, { merchantId: m.id, required: false, ...body }, { token: m.key });
    expect(res.status, JSON.stringify(res.body)).toBe(201);
    return res.body;
  };
  const text = await q({ text: 'Why do you join?', kind: 'Text', required: true });
  const single = await q({ text: 'Shirt size', kind: 'SingleChoice', required: true, options: [{ label: 'S' }, { label: 'M' }, { label: 'L' }] });
  const multi = await q({ text: 'Interests', kind: 'MultiChoice', required: false, options: [{ label: 'Running' }, { label: 'Swimming' }] });
  return { ...m, questions: { text, single, multi } };
}

export async function invite(api: ApiClient, m: { id: string; key: string }, extra: Record<string, unknown> = {}) {
  const email = `${unique('inv')}@example.com`;
  const res = await api.post('/api/Invitations', { merchantId: m.id, firstName: 'Ada', lastName: 'Lovelace', email, ...extra }, { token: m.key });
  expect(res.status, JSON.stringify(res.body)).toBe(200);
  return { ...(res.body as { invitationId: string; token: string; expiresAt: string }), email };
}

/** The token of the emailed onboarding link to `email`. */
export async function emailedToken(dataDir: string, email: string): Promise<string> {
  const message = await waitForMessage(dataDir, email, (m) => /\/onboard\?token=/.test(m.text));
  return tokenFromLink(message.text, 'onboard');
}

export async function signUpCustomer(api: ApiClient, email = `${unique('c')}@example.com`) {
  const res = await api.post('/api/account/signup', { email, password: PASSWORD, firstName: 'Ada', lastName: 'Lovelace', dateOfBirth: '1990-05-17' });
  expect(res.status, JSON.stringify(res.body)).toBe(200);
  return { email, token: res.body.token as string, accountId: res.body.account.id as string };
}

/** Saves every wizard step with valid answers. */
export async function fillWizard(api: ApiClient, token: string, invitationId: string, m: OnboardingMerchant) {
  const steps = [
    await api.patch('/api/onboard/details', { invitationId, firstName: 'Ada', lastName: 'Lovelace', phone: '+61 400 000 000', city: 'Sydney' }, { token }),
    await api.post('/api/onboard/payment-method', { invitationId, ...CARD }, { token }),
    await api.patch('/api/onboard/plan', { invitationId, planId: m.planId }, { token }),
    await api.patch(
      '/api/onboard/answers',
      {
        invitationId,
        answers: [
          { questionId: m.questions.text.id, textValue: 'Fitness' },
          { questionId: m.questions.single.id, optionIds: [m.questions.single.options[1]!.id] },
          { questionId: m.questions.multi.id, optionIds: m.questions.multi.options.map((o) => o.id) },
        ],
      },
      { token },
    ),
  ];
  for (const s of steps) expect(s.status, JSON.stringify(s.body)).toBe(204);
}
