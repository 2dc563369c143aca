import { oneLine, type EmailMessage, type SmsMessage } from '@billing/service-runtime';

/** The link of an invitation: `<publicBaseUrl>/onboard?token=<plaintext token>`. */
export function onboardingLink(publicBaseUrl: string, token: string): string {
  return `${publicBaseUrl.replace(/\/+$/, '')}/onboard?token=${encodeURIComponent(token)}`;
}

/** The merchant's and the invitee's names are quoted on one line each (`oneLine`): both are whatever a merchant's API key sent. */
export function invitationEmail(input: { to: string; firstName: string; merchantName: string; link: string; expiresAt: Date }): EmailMessage {
  const merchantName = oneLine(input.merchantName);
  return {
    to: input.to,
    subject: `${merchantName} invited you to sign up`,
    text: [
      `Hello ${oneLine(input.firstName)},`,
      '',
      `${merchantName} invited you to become a member. Sign up here (the link works until ${input.expiresAt.toISOString().slice(0, 10)}):`,
      input.link,
      '',
      'If you did not expect this, you can ignore this email.',
    ].join('\n'),
  };
}

export function invitationSms(input: { to: string; merchantName: string; link: string }): SmsMessage {
  return { to: input.to, text: `${oneLine(input.merchantName)} invited you to sign up: ${input.link}` };
}
