import { describe, expect, it } from 'vitest';
import { serializeError } from './logger.js';

/** What pg (and MikroORM, which copies its fields) raise: the statement and values in the message. */
function pgError() {
  return Object.assign(new Error(`insert into "customer_account" ("email") values ('ada@example.com') - duplicate key value violates unique constraint`), {
    code: '23505',
    severity: 'ERROR',
    detail: 'Key (email)=(ada@example.com) already exists.',
    constraint: 'customer_account_email_unique',
    table: 'customer_account',
    routine: '_bt_check_unique',
  });
}

describe('logged errors', () => {
  it('never carry the bound values of a failed statement', () => {
    const logged = JSON.stringify(serializeError(pgError()));
    expect(logged).not.toContain('ada@example.com');
    expect(logged).toContain('23505');
    expect(logged).toContain('customer_account_email_unique');
  });

  it('hide them in a cause chain too', () => {
    const logged = JSON.stringify(serializeError(new Error('could not create the account', { cause: pgError() })));
    expect(logged).not.toContain('ada@example.com');
    expect(logged).toContain('could not create the account');
  });

  it('keep the message of other errors', () => {
    expect(JSON.stringify(serializeError(new Error('connect ECONNREFUSED 127.0.0.1:4222')))).toContain('ECONNREFUSED');
  });
});
