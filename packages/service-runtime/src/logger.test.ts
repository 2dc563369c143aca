import { Writable } from 'node:stream';
import { pino } from 'pino';
import { describe, expect, it } from 'vitest';
import { errorForLog } from './logger.js';

/** A database error as node-postgres raises it, with the statement and values knex puts in its message. */
function databaseError(): Error {
  const e = Object.assign(new Error(`insert into "member" ("email") values ('ada@example.com') - duplicate key value violates unique constraint "member_email_unique"`), {
    name: 'UniqueConstraintViolationException',
    code: '23505',
    sqlState: '23505',
    severity: 'ERROR',
    routine: '_bt_check_unique',
    constraint: 'member_email_unique',
    table: 'member',
    detail: 'Key (email)=(ada@example.com) already exists.',
  });
  return e;
}

describe('errorForLog', () => {
  it('keeps bound values and row details of a database error out of the log line', () => {
    const lines: string[] = [];
    const log = pino({ serializers: { err: errorForLog } }, new Writable({ write: (chunk, _enc, done) => (lines.push(String(chunk)), done()) }));
    log.error({ err: databaseError() }, 'unhandled error');
    expect(lines.join('')).not.toContain('ada@example.com');
    expect(JSON.parse(lines[0]!).err).toMatchObject({ code: '23505', constraint: 'member_email_unique', table: 'member', message: 'database error 23505 (constraint member_email_unique)' });
  });

  it('keeps them out when the database error is the cause of another', () => {
    const logged = JSON.stringify(errorForLog(new Error('could not create the member', { cause: databaseError() })));
    expect(logged).not.toContain('ada@example.com');
    expect(logged).toContain('could not create the member');
    expect(logged).toContain('member_email_unique');
  });

  it('leaves other errors as pino shows them', () => {
    expect(errorForLog(new TypeError('boom'))).toMatchObject({ type: 'TypeError', message: 'boom' });
  });
});
