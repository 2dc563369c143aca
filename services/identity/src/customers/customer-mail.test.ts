import { describe, expect, it } from 'vitest';
import { emailVerificationEmail } from './customer-mail.js';

describe('emailVerificationEmail', () => {
  it('quotes the first name a sign-up gave on one line, so it cannot add paragraphs of its own to the email', () => {
    // Sign-up is anonymous and the address anyone's: the name is the only text of the sender's choosing.
    const firstName = 'Sam,\r\n\r\nYour account is locked. Restore it at https://evil.example/r\u2028\u202e\n\n\n';
    const mail = emailVerificationEmail('victim@example.com', firstName, 'tok', 'https://billing.example/');
    const lines = mail.text.split('\n');
    expect(lines[0]).toBe('Hello Sam, Your account is locked. Restore it at https://evil.example/r,');
    expect(lines.slice(1)).toEqual(['', 'Please confirm your email address by opening this link (it works once, within 24 hours):', 'https://billing.example/verify-email?token=tok']);
  });

  it('keeps an ordinary name as given', () => {
    expect(emailVerificationEmail('a@example.com', 'Zoë Ann', 't', 'https://b.example').text.split('\n')[0]).toBe('Hello Zoë Ann,');
  });
});
