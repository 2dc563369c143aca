import type { EmailMessage, SmsMessage } from '@billing/service-runtime';

/** The link of an invitation: `<publicBaseUrl>/onboard?token=<plaintext token>`. */
export function onboardingLink(publicBaseUrl: string, token: string): string {
  return `${publicBaseUrl.replace(/\/+$/, '')}/onboard?token=${encodeURIComponent(token)}`;
}

export function invitationEmail(input: { to: string; firstName: string; merchantName: string; link: string; expiresAt: Date }): EmailMessage {
  return {
    to: input.to,
    subject: `${input.merchantName} invited you to sign up`,
    text: [
      `Hello ${input.firstName},`,
      '',
      `${input.merchantName} invited you to become a member. Sign up here (the link works until ${input.expiresAt.toISOString().slice(0, 10)}):`,
      input.link,
      '',
      'If you did not expect this, you can ignore this email.',
    ].join('\n'),
  };
}

export function invitationSms(input: { to: string; merchantName: string; link: string }): SmsMessage {
  return { to: input.to, text: `${input.merchantName} invited you to sign up: ${input.link}` };
}
