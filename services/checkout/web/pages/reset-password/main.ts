import { callApi, type ApiResult, type FieldErrors } from '../../shared/api.js';
import { announce, byId, clearFieldErrors, onSubmit, showFieldErrors } from '../../shared/forms.js';
import { takeLinkToken } from '../../shared/link-token.js';

// The page of the link forgot-password emails (`/reset-password?token=...`): the customer
// chooses a new password and the page sets it with the link's one-time token. The token is
// spent only by that POST, so opening the link (or a mail scanner fetching it) changes nothing.
// A link that is used up or expired, or no link at all, offers to email a new one.

/** The bounds of a new password (`NewPassword` in packages/contracts/src/customers.ts). */
const PASSWORD_MIN = 8;
const PASSWORD_MAX = 128;

const form = byId<HTMLFormElement>('reset-form');
const submit = byId<HTMLButtonElement>('submit');
const requestForm = byId<HTMLFormElement>('request-form');
const requestSubmit = byId<HTMLButtonElement>('request-submit');
const status = byId('status');
const alertBox = byId('alert');
const notice = byId('notice');
const title = byId('title');

const token = takeLinkToken('reset-password:token');
/** Set in this tab once the link's password is set: a reload says so again, rather than asking for the used link. */
const DONE_KEY = 'reset-password:done';
const DONE_MESSAGE = 'Your password has been changed. You can now sign in with your new password.';

const value = (f: HTMLFormElement, name: string) => (f.elements.namedItem(name) as HTMLInputElement).value;

/** What is wrong with the two password fields, checked before anything is sent. */
function passwordErrors(password: string, confirmation: string): FieldErrors {
  const errors: FieldErrors = {};
  if (password.length < PASSWORD_MIN) errors.newPassword = [`Use at least ${PASSWORD_MIN} characters.`];
  else if (password.length > PASSWORD_MAX) errors.newPassword = [`Use at most ${PASSWORD_MAX} characters.`];
  else if (!/\S/.test(password)) errors.newPassword = ['Use at least one character that is not a space.'];
  if (confirmation === '') errors.confirmPassword = ['Type the new password again.'];
  else if (confirmation !== password) errors.confirmPassword = ['The two passwords do not match.'];
  return errors;
}

/** Field errors beside their fields, with a summary announced. */
function showErrors(f: HTMLFormElement, errors: FieldErrors): void {
  const count = Object.keys(errors).length;
  const unplaced = showFieldErrors(f, errors);
  announce(alertBox, `Please correct ${count === 1 ? 'the highlighted field' : `the ${count} highlighted fields`}.${unplaced.length ? ` ${unplaced.join(' ')}` : ''}`);
}

/** The message for an answer the page cannot act on otherwise. */
function failureMessage(res: ApiResult, action: string): string {
  if (res.status === 0) return `We could not reach the service; your connection may have dropped. Check it and press ${action} to try again.`;
  if (res.status === 429) return `Too many attempts in a short time. Wait a minute, then press ${action} again.`;
  if (res.status === 503) return `The service is busy right now. Press ${action} again in a moment.`;
  if (res.status >= 500) return `Something went wrong on our side. Press ${action} again in a moment.`;
  return (res.body?.detail as string) || 'That did not work. Please try again.';
}

/** Replaces the password form with a message (done, or a link that cannot work). */
function stop(message: string, kind: 'alert' | 'notice', heading?: string): void {
  form.hidden = true;
  announce(status, '');
  announce(kind === 'alert' ? alertBox : notice, message);
  if (heading) {
    title.textContent = heading;
    document.title = heading;
  }
  title.focus();
}

function offerNewLink(): void {
  requestForm.hidden = false;
}

async function setPassword(): Promise<void> {
  clearFieldErrors(form);
  announce(alertBox, '');
  const newPassword = value(form, 'newPassword');
  const errors = passwordErrors(newPassword, value(form, 'confirmPassword'));
  if (Object.keys(errors).length) return showErrors(form, errors);

  announce(status, 'Saving your new password…');
  const res = await callApi('POST', '/api/account/reset-password', { body: { token: token.value, newPassword } });
  announce(status, '');
  if (res.status === 204) {
    token.forget();
    sessionStorage.setItem(DONE_KEY, '1');
    form.reset();
    return stop(DONE_MESSAGE, 'notice', 'Password changed');
  }
  if (res.status === 400 && res.body?.errors?.token) {
    token.forget();
    stop('This password reset link has expired or has already been used: a link works once, within one hour of being sent. You can request a new link below.', 'alert', 'Link no longer valid');
    return offerNewLink();
  }
  if (res.status === 400 && res.body?.errors) return showErrors(form, res.body.errors as FieldErrors);
  announce(alertBox, failureMessage(res, 'Set new password'));
}

async function requestNewLink(): Promise<void> {
  clearFieldErrors(requestForm);
  announce(alertBox, '');
  const email = value(requestForm, 'email').trim();
  if (email === '') return showErrors(requestForm, { email: ['Enter the email address of your account.'] });
  announce(status, 'Sending a new link…');
  const res = await callApi('POST', '/api/account/forgot-password', { body: { email } });
  announce(status, '');
  if (res.status === 202) {
    requestForm.hidden = true;
    announce(notice, `If an account uses ${email}, we have emailed it a new link to reset the password. It works once, within one hour.`);
    title.focus();
    return;
  }
  if (res.status === 400 && res.body?.errors) return showErrors(requestForm, res.body.errors as FieldErrors);
  announce(alertBox, failureMessage(res, 'Email me a new link'));
}

/** A request that threw (the network): said with the button's name. */
const networkFailure = (button: HTMLButtonElement) => () => announce(alertBox, failureMessage({ status: 0, body: undefined }, button.textContent ?? 'the button'));
onSubmit(form, submit, setPassword, networkFailure(submit));
onSubmit(requestForm, requestSubmit, requestNewLink, networkFailure(requestSubmit));

if (token.value) {
  sessionStorage.removeItem(DONE_KEY);
  form.hidden = false;
} else if (sessionStorage.getItem(DONE_KEY)) {
  stop(DONE_MESSAGE, 'notice', 'Password changed');
} else {
  stop('This page needs the link from your password reset email. Open the whole link from the email, or request a new link below.', 'alert', 'Reset your password');
  offerNewLink();
}
