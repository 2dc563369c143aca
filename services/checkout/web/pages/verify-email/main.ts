import { callApi } from '../../shared/api.js';
import { announce, byId } from '../../shared/forms.js';
import { takeLinkToken } from '../../shared/link-token.js';

// The page of the link emailed at sign-up (`/verify-email?token=...`). Opening the link is the
// confirmation the customer expects, so the page's script confirms at once with
// POST /api/account/verify-email. The GET of the page changes nothing: a mail scanner that
// only fetches the link spends no token. One that also runs the page's script would confirm an
// address whose mailbox received the mail, which is all the confirmation proves.

const status = byId('status');
const alertBox = byId('alert');
const notice = byId('notice');
const title = byId('title');
const retryActions = byId('retry-actions');
const retry = byId<HTMLButtonElement>('retry');

const token = takeLinkToken('verify-email:token');
const VERIFIED_KEY = 'verify-email:verified';
const VERIFIED_MESSAGE = 'Thank you: your email address is confirmed. There is nothing more to do here; you can close this page.';

/** The final word of the page: a heading, a message, and focus on the heading. */
function finish(heading: string, message: string, kind: 'alert' | 'notice'): void {
  title.textContent = heading;
  document.title = heading;
  announce(status, '');
  announce(kind === 'alert' ? alertBox : notice, message);
  title.focus();
}

async function verify(): Promise<void> {
  retryActions.hidden = true;
  announce(alertBox, '');
  announce(status, 'Confirming your email address…');
  const res = await callApi('POST', '/api/account/verify-email', { body: { token: token.value } });
  if (res.status === 204) {
    token.forget();
    // A reload of this tab says it again, rather than asking for the link it has used.
    sessionStorage.setItem(VERIFIED_KEY, '1');
    return finish('Email verified', VERIFIED_MESSAGE, 'notice');
  }
  if (res.status === 400) {
    token.forget();
    return finish(
      'Link no longer valid',
      'This confirmation link has expired or has already been used: a link works once, within 24 hours of sign-up. If you opened it before, your email address is already confirmed and there is nothing more to do.',
      'alert',
    );
  }
  // Nothing was decided (no answer, too many requests, a fault): the same link can try again.
  announce(status, '');
  const reason =
    res.status === 0 ? 'We could not reach the service; your connection may have dropped.' : res.status === 429 ? 'There were too many attempts in a short time.' : 'Something went wrong on our side.';
  announce(alertBox, `${reason} Your email address is not confirmed yet. Press Try again in a moment.`);
  retryActions.hidden = false;
}

let busy = false;
retry.addEventListener('click', () => {
  if (busy) return;
  busy = true;
  void verify().finally(() => (busy = false));
});

if (token.value) void verify();
else if (sessionStorage.getItem(VERIFIED_KEY)) finish('Email verified', VERIFIED_MESSAGE, 'notice');
else finish('Confirm your email', 'This page needs the link from your confirmation email. Open the whole link from the email we sent when you signed up.', 'alert');
