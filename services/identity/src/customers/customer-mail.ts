import { oneLine, type EmailMessage } from '@billing/service-runtime';

/** Links in customer emails point at `<publicBaseUrl>/<page>?token=<plaintext token>`. */
function link(publicBaseUrl: string, page: string, token: string): string {
  return `${publicBaseUrl.replace(/\/+$/, '')}/${page}?token=${encodeURIComponent(token)}`;
}

export function passwordResetEmail(to: string, token: string, publicBaseUrl: string): EmailMessage {
  return {
    to,
    subject: 'Reset your password',
    text: [
      'We received a request to reset the password of your account.',
      '',
      `Choose a new password here (the link works once, within one hour):`,
      link(publicBaseUrl, 'reset-password', token),
      '',
      'If you did not ask for this, you can ignore this email; your password is unchanged.',
    ].join('\n'),
  };
}

export function emailVerificationEmail(to: string, firstName: string, token: string, publicBaseUrl: string): EmailMessage {
  return {
    to,
    subject: 'Confirm your email address',
    text: [
      `Hello ${oneLine(firstName)},`,
      '',
      'Please confirm your email address by opening this link (it works once, within 24 hours):',
      link(publicBaseUrl, 'verify-email', token),
    ].join('\n'),
  };
}
