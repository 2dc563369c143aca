import { describe, expect, it } from 'vitest';
import { invitationEmail, invitationSms } from './invitation-messages.js';

describe('invitation messages', () => {
  const link = 'https://billing.example/onboard?token=t';
  const expiresAt = new Date('2030-01-02T00:00:00Z');

  it('quote the merchant and invitee names on one line each: a name cannot add lines of its own', () => {
    const merchantName = 'Acme\n\nIMPORTANT: pay your overdue fee at https://evil.example\n';
    const mail = invitationEmail({ to: 'a@example.com', firstName: 'Ada\r\n\r\nAlso visit https://evil.example', merchantName, link, expiresAt });
    expect(mail.subject).toBe('Acme IMPORTANT: pay your overdue fee at https://evil.example invited you to sign up');
    expect(mail.text.split('\n')).toEqual([
      'Hello Ada Also visit https://evil.example,',
      '',
      'Acme IMPORTANT: pay your overdue fee at https://evil.example invited you to become a member. Sign up here (the link works until 2030-01-02):',
      link,
      '',
      'If you did not expect this, you can ignore this email.',
    ]);
    expect(invitationSms({ to: '+61400000000', merchantName, link }).text).toBe(`Acme IMPORTANT: pay your overdue fee at https://evil.example invited you to sign up: ${link}`);
  });
});
