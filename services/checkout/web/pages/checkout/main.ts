import { callApi, sleep, waitText, type ApiResult, type FieldErrors } from '../../shared/api.js';
import { announce, byId, clearFieldErrors, onSubmit, showFieldErrors } from '../../shared/forms.js';
import { takeLinkParams } from '../../shared/link-token.js';

// The hosted checkout page: resolves the signed link in the address, shows the merchant and
// plan, collects the customer's details and bank account, and completes the checkout.

interface SessionView {
  sessionId: string;
  merchantName: string;
  plan: { name: string; amount: number; currency: string; interval: string; intervalCount?: number };
  customer: { email: string | null; firstName: string | null; lastName: string | null; phone: string | null };
  status: 'Open' | 'Completed';
  returnUrl: string;
}

const LINK_MESSAGES: Record<string, string> = {
  LinkExpired: 'This checkout link has expired. Ask the business that sent it for a new one.',
  NonceAlreadyUsed: 'This checkout link has already been used. Ask the business that sent it for a new one.',
  PlanNotFound: 'The plan in this checkout link is no longer available.',
  InvalidSignature: 'This checkout link is not valid. Check that you opened the whole link, or ask for a new one.',
  ApiKeyNotFound: 'This checkout link is no longer valid. Ask the business that sent it for a new one.',
  MerchantMismatch: 'This checkout link is not valid. Ask the business that sent it for a new one.',
};
const UNREACHABLE = 'We could not reach the payment service; your connection may have dropped. Nothing has been charged twice. Press Subscribe to try again.';
const PROVIDER_DOWN = 'The payment provider is not responding right now. Nothing has been charged twice. Press Subscribe to try again in a moment.';

const form = byId<HTMLFormElement>('checkout-form');
const submit = byId<HTMLButtonElement>('submit');
const status = byId('status');
const alertBox = byId('alert');
const notice = byId('notice');
const title = byId('title');

// Out of the address bar (and the history) at once; kept in this tab for a reload.
const link = takeLinkParams('checkout:link', ['d', 's'] as const);
let token = '';
let session: SessionView | undefined;

/** Resolves the link into a session token (a replay of the same link gives a fresh token). */
async function resolveLink(): Promise<ApiResult> {
  const { d, s } = link;
  if (!d || !s) return { status: 401, body: { outcome: 'InvalidSignature' } };
  const res = await callApi('POST', '/api/Checkout/sessions/resolve', { body: { d, s } });
  if (res.status === 200) token = res.body.sessionToken;
  return res;
}

/**
 * A call with the session token; an expired token is renewed once through the link. When the
 * link can no longer renew it (it has expired meanwhile, or the renewal got no answer), the
 * answer is the link's, so the page says why rather than that a credential is missing.
 */
async function withSession(method: string, path: string, body?: unknown): Promise<ApiResult> {
  const res = await callApi(method, path, { token, body });
  if (res.status !== 401) return res;
  const renewed = await resolveLink();
  return renewed.status === 200 ? callApi(method, path, { token, body }) : renewed;
}

function formatPrice(plan: SessionView['plan']): string {
  let amount: string;
  try {
    amount = new Intl.NumberFormat(navigator.language || 'en-AU', { style: 'currency', currency: plan.currency }).format(plan.amount);
  } catch {
    amount = `${plan.amount.toFixed(2)} ${plan.currency}`;
  }
  const unit = plan.interval.toLowerCase();
  const count = plan.intervalCount ?? 1;
  return count > 1 ? `${amount} every ${count} ${unit}s` : `${amount} per ${unit}`;
}

/** The tab's title for the plan being bought, once the session is read (until then "Checkout"). */
let pageTitle = 'Checkout';

/** A message instead of the form (bad link, already completed): nothing to submit. */
function stop(message: string, kind: 'alert' | 'notice' = 'alert'): void {
  // The tab says it too, as the other pages' titles follow their state.
  document.title = kind === 'alert' ? `Checkout unavailable – ${pageTitle}` : `Already subscribed – ${pageTitle}`;
  form.hidden = true;
  announce(status, '');
  announce(kind === 'alert' ? alertBox : notice, message);
  title.focus();
}

async function load(): Promise<void> {
  const resolved = await resolveLink();
  if (resolved.status !== 200) {
    if (resolved.status === 0 || resolved.status >= 500) return stop('We could not load your checkout. Check your connection and reload the page.');
    // Busy, not refused: the link itself may be fine.
    if (resolved.status === 429) return stop(`Too many attempts in a short time. Wait ${waitText(resolved.retryAfterSeconds)}, then reload the page.`);
    return stop(LINK_MESSAGES[resolved.body?.outcome as string] ?? 'This checkout link is not valid.');
  }
  const res = await withSession('GET', '/api/Checkout/sessions/me');
  if (res.status !== 200) return stop('We could not load your checkout. Check your connection and reload the page.');
  session = res.body as SessionView;
  byId('merchant').textContent = `Subscribing with ${session.merchantName}`;
  byId('merchant').hidden = false;
  title.textContent = `Subscribe to ${session.plan.name}`;
  pageTitle = `Subscribe to ${session.plan.name} with ${session.merchantName}`;
  document.title = pageTitle;
  byId('plan-name').textContent = session.plan.name;
  byId('plan-price').textContent = formatPrice(session.plan);
  byId('summary').hidden = false;
  if (session.status === 'Completed') {
    return stop('This checkout is already complete: you are subscribed. There is nothing more to do here.', 'notice');
  }
  for (const [field, value] of Object.entries(session.customer ?? {})) {
    const input = form.querySelector<HTMLInputElement>(`[name="${field}"]`);
    if (input && value) input.value = value;
  }
  submit.setAttribute('aria-label', `Subscribe: ${formatPrice(session.plan)}`);
  form.hidden = false;
  announce(status, '');
}

const value = (name: string) => (form.elements.namedItem(name) as HTMLInputElement).value;

/** The message for a call that did not answer with a result the page understands. */
function failureMessage(res: ApiResult): string {
  if (res.status === 0) return UNREACHABLE;
  if (res.status === 502) return PROVIDER_DOWN;
  if (res.status >= 500 || res.status === 429) return 'Something went wrong on our side. Nothing has been charged twice. Press Subscribe to try again.';
  return (res.body?.failureReason as string) ?? (res.body?.detail as string) ?? 'The checkout could not be completed.';
}

async function subscribe(): Promise<void> {
  if (!session) return;
  clearFieldErrors(form);
  announce(alertBox, '');
  announce(status, 'Setting up your subscription…');

  const errors: FieldErrors = {};
  const phone = value('phone');
  const customer = await withSession('PATCH', '/api/Checkout/sessions/me/customer', { email: value('email'), firstName: value('firstName'), lastName: value('lastName'), phone: phone === '' ? null : phone });
  if (customer.status === 400 && customer.body?.errors) Object.assign(errors, customer.body.errors);
  else if (customer.status === 409 && (await completedElsewhere())) return;
  else if (customer.status !== 204) return fail(customer);

  const bank = await withSession('POST', '/api/Checkout/sessions/me/capture-bank', {
    sessionId: session.sessionId,
    accountName: value('accountName'),
    bsb: value('bsb'),
    accountNumber: value('accountNumber'),
  });
  if (bank.status === 400 && bank.body?.errors) Object.assign(errors, bank.body.errors);
  else if (bank.status === 409 && (await completedElsewhere())) return;
  else if (bank.status !== 200) return fail(bank);
  if (Object.keys(errors).length) {
    announce(status, '');
    const count = Object.keys(errors).length;
    const unplaced = showFieldErrors(form, errors);
    announce(alertBox, `Please correct ${count === 1 ? 'the highlighted field' : `the ${count} highlighted fields`}.${unplaced.length ? ` ${unplaced.join(' ')}` : ''}`);
    return;
  }

  for (let attempt = 0; ; attempt++) {
    const done = await withSession('POST', '/api/Checkout/sessions/me/complete', { sessionId: session.sessionId, providerToken: bank.body.providerToken });
    if (done.status === 200 && done.body?.status === 'Completed') {
      announce(status, 'You are subscribed. Taking you back…');
      location.assign(done.body.returnUrl ?? session.returnUrl);
      return;
    }
    if (done.status === 409 && done.body?.status === 'Pending' && attempt < 20) {
      announce(status, 'Still working on it…');
      await sleep(1000);
      continue;
    }
    return fail(done);
  }
}

/**
 * After a 409 (the session is completed): when the session did complete — an earlier press
 * whose answer was lost, or another tab — the customer is subscribed, so the page goes to the
 * return URL as the completion itself would have. False when the session is not completed.
 */
async function completedElsewhere(): Promise<boolean> {
  const res = await withSession('GET', '/api/Checkout/sessions/me');
  if (res.status !== 200 || res.body?.status !== 'Completed') return false;
  announce(alertBox, '');
  announce(status, 'You are subscribed. Taking you back…');
  location.assign(res.body.returnUrl ?? session!.returnUrl);
  return true;
}

function fail(res: ApiResult): void {
  const refused = res.body?.outcome as string | undefined;
  // The session's token expired and its link can no longer open it: nothing more can be sent.
  if (refused && LINK_MESSAGES[refused]) return stop(`Your checkout session has ended and nothing has been charged. ${LINK_MESSAGES[refused]}`);
  announce(status, '');
  announce(alertBox, failureMessage(res));
}

onSubmit(form, submit, subscribe, () => fail({ status: 0, body: undefined }));

void load();
