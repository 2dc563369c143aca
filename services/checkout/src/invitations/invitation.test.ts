import { createHash } from 'node:crypto';
import { describe, expect, it } from 'vitest';
import { DomainError } from '@billing/contracts';
import { Invitation } from './invitation.js';

const issue = (now = new Date('2026-01-01T00:00:00Z')) =>
  Invitation.issue({ merchantId: 'm', firstName: 'A', lastName: 'B', email: 'a@example.com', phone: null, expiresInDays: 2 }, now);
const codeOf = (fn: () => void) => {
  try {
    fn();
  } catch (e) {
    return (e as DomainError).code;
  }
  return undefined;
};

describe('Invitation', () => {
  it('keeps only the SHA-256 of a 32-byte token', () => {
    const { invitation, token } = issue();
    expect(Buffer.from(token, 'base64url')).toHaveLength(32);
    expect(invitation.tokenHash).toBe(createHash('sha256').update(token).digest('hex'));
  });

  it('moves Pending → Accepted → Completed and expires only when not completed', () => {
    const { invitation } = issue();
    const later = new Date('2026-01-05T00:00:00Z');
    expect(invitation.status(new Date('2026-01-01T01:00:00Z'))).toBe('Pending');
    invitation.accept('acct', new Date('2026-01-01T01:00:00Z'));
    expect(invitation.status(new Date('2026-01-01T02:00:00Z'))).toBe('Accepted');
    expect(invitation.status(later)).toBe('Expired');
    invitation.complete({ memberId: 'mem', subscriptionId: 'sub' });
    expect(invitation.status(later)).toBe('Completed');
  });

  it('binds to one account: the same again is fine, another is a conflict', () => {
    const { invitation } = issue(new Date());
    invitation.accept('acct');
    invitation.accept('acct');
    expect(codeOf(() => invitation.accept('other'))).toBe('conflict');
  });

  it('refuses acceptance once revoked or expired (gone), and revoking a completed one', () => {
    const revoked = issue(new Date()).invitation;
    revoked.revoke();
    expect(codeOf(() => revoked.accept('acct'))).toBe('gone');
    const expired = issue(new Date('2020-01-01T00:00:00Z')).invitation;
    expect(codeOf(() => expired.accept('acct'))).toBe('gone');
    const completed = issue(new Date()).invitation;
    completed.complete({ memberId: 'm', subscriptionId: 's' });
    expect(codeOf(() => completed.revoke())).toBe('invalid_transition');
  });
});
