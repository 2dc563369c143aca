import { describe, expect, it } from 'vitest';
import { CustomerSignupRequest, dateOfBirthProblem, UpdateCustomerProfileRequest } from './customers.js';
import { fieldErrorsOf } from './validation.js';

describe('dateOfBirthProblem', () => {
  const today = '2026-11-21';
  it.each(['1990-05-17', '2000-02-29', '1900-01-01', '2026-11-20'])('accepts %s', (d) => {
    expect(dateOfBirthProblem(d, today)).toBeUndefined();
  });
  it.each([
    ['17/05/1990', 'Must be a date in the form YYYY-MM-DD.'],
    ['1990-5-17', 'Must be a date in the form YYYY-MM-DD.'],
    ['1990-05-17T00:00:00Z', 'Must be a date in the form YYYY-MM-DD.'],
    ['2001-02-29', 'Must be a real calendar date.'],
    ['1990-13-01', 'Must be a real calendar date.'],
    ['1990-04-31', 'Must be a real calendar date.'],
    ['1899-12-31', 'Must be on or after 1900-01-01.'],
    ['2026-11-21', 'Must be in the past.'],
    ['2030-01-01', 'Must be in the past.'],
  ])('refuses %s', (d, message) => {
    expect(dateOfBirthProblem(d, today)).toBe(message);
  });
});

describe('CustomerSignupRequest', () => {
  it('names every failing field', () => {
    const r = CustomerSignupRequest.safeParse({ email: 'not-an-email', password: 'short', firstName: '  ', dateOfBirth: '2001-02-29', acceptedTerms: 'yes' });
    expect(r.success).toBe(false);
    expect(Object.keys(fieldErrorsOf(r.error!)).sort()).toEqual(['acceptedTerms', 'dateOfBirth', 'email', 'firstName', 'lastName', 'password']);
  });

  it('keeps names and optional strings exactly as sent (contract §2), an empty one too, and refuses blank names', () => {
    const r = CustomerSignupRequest.parse({ email: 'a@b.co', password: 'longenough', firstName: ' Ann ', lastName: 'Lee', dateOfBirth: '1990-05-17', city: '' });
    expect(r.firstName).toBe(' Ann ');
    expect(r.city).toBe('');
    const blank = CustomerSignupRequest.safeParse({ email: 'a@b.co', password: 'longenough', firstName: ' \t ', lastName: 'Lee', dateOfBirth: '1990-05-17' });
    expect(blank.success).toBe(false);
  });

  it('limits the password to 8..128 characters', () => {
    const base = { email: 'a@b.co', firstName: 'A', lastName: 'B', dateOfBirth: '1990-05-17' };
    expect(CustomerSignupRequest.safeParse({ ...base, password: 'x'.repeat(7) }).success).toBe(false);
    expect(CustomerSignupRequest.safeParse({ ...base, password: 'x'.repeat(8) }).success).toBe(true);
    expect(CustomerSignupRequest.safeParse({ ...base, password: 'x'.repeat(128) }).success).toBe(true);
    expect(CustomerSignupRequest.safeParse({ ...base, password: 'x'.repeat(129) }).success).toBe(false);
  });
});

describe('UpdateCustomerProfileRequest', () => {
  it('keeps absent fields absent and null fields null', () => {
    const r = UpdateCustomerProfileRequest.parse({ firstName: 'A', lastName: 'B', phone: null });
    expect(r.phone).toBeNull();
    expect('city' in r ? r.city : undefined).toBeUndefined();
  });
});
