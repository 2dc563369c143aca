import { callApi, waitText, type ApiResult, type FieldErrors } from '../../shared/api.js';
import { announce, byId } from '../../shared/forms.js';
import { takeLinkToken } from '../../shared/link-token.js';
import { cardBrand, isLuhnValid, tokeniseBank, tokeniseCard, type Tokenised } from './tokenise.js';

// The self-serve onboarding page: the invitee opens the emailed link, signs up (or signs in),
// and walks through details, payment method, plan and questions to a member with a subscription.
// The wizard's state lives on the server; a reload resumes at the step it reports.

type StepName = 'welcome' | 'account' | 'details' | 'payment' | 'plan' | 'questions' | 'review' | 'done';
const SERVER_STEPS: Record<string, StepName> = { Details: 'details', PaymentMethod: 'payment', Plan: 'plan', Questions: 'questions', Review: 'review', Done: 'done' };
const ORDER: StepName[] = ['welcome', 'account', 'details', 'payment', 'plan', 'questions', 'review', 'done'];
const TITLES: Record<StepName, string> = { welcome: 'Welcome', account: 'Your account', details: 'Your details', payment: 'Payment method', plan: 'Choose a plan', questions: 'A few questions', review: 'Review', done: 'Done' };

interface Plan { id: string; name: string; amount: number; currency: string; interval: string; intervalCount: number; trialDays: number }
interface Question { id: string; text: string; kind: 'Text' | 'SingleChoice' | 'MultiChoice'; required: boolean; options: { id: string; label: string }[] }
interface Answer { questionId: string; textValue: string | null; optionIds: string[] }
interface Preview { invitationId: string; merchantName: string; firstName: string; lastName: string; email: string | null; accountState: 'None' | 'Unclaimed' | 'Claimed'; status: string }
interface State {
  invitationId: string;
  status: string;
  step: string;
  phone: string | null;
  merchantName: string;
  email: string | null;
  firstName: string;
  lastName: string;
  details: Record<string, string | null> | null;
  paymentMethod: (Tokenised & { brand: string | null }) | null;
  planId: string | null;
  answers: Answer[];
  plans: Plan[];
  questions: Question[];
  subscriptionId: string | null;
}

const GONE: Record<string, string> = {
  Revoked: 'This invitation has been withdrawn by the business that sent it. Ask them for a new one if you still want to sign up.',
  Expired: 'This invitation has expired. Ask the business that sent it for a new one.',
};

const statusLine = byId('status');
const alertBox = byId('alert');
const progress = byId('progress');
const title = byId('title');
// Out of the address bar (and the history) at once; kept in this tab for a reload.
const inviteToken = takeLinkToken('onboard:invitation').value;
/** The customer token survives a reload in this tab only (sessionStorage), so the wizard resumes. */
const TOKEN_KEY = `onboard:${inviteToken.slice(0, 16)}`;
let customerToken = sessionStorage.getItem(TOKEN_KEY) ?? '';
let preview: Preview | undefined;
let state: State | undefined;
let current: StepName = 'welcome';
let signIn = false;
let busy = false;

const stepEl = (s: StepName) => byId(`step-${s}`);
const formOf = (s: StepName) => stepEl(s) as HTMLFormElement;

function formatPrice(plan: Plan): string {
  let amount: string;
  try {
    amount = new Intl.NumberFormat('en-AU', { style: 'currency', currency: plan.currency }).format(plan.amount);
  } catch {
    amount = `${plan.amount.toFixed(2)} ${plan.currency}`;
  }
  const unit = plan.interval.toLowerCase();
  return plan.intervalCount > 1 ? `${amount} every ${plan.intervalCount} ${unit}s` : `${amount} per ${unit}`;
}

/** True while the browser's Back or Forward moves the wizard (its history entry exists already). */
let fromHistory = false;

/**
 * Each step the wizard shows is a history entry of this page (the address stays the same), so
 * the browser's Back goes to the step before rather than leaving the wizard, and Forward returns.
 */
function remember(step: StepName): void {
  const entry = { onboardStep: step };
  const at = (history.state as { onboardStep?: StepName } | null)?.onboardStep;
  if (at === step) return;
  if (fromHistory || at === undefined) history.replaceState(entry, '');
  else history.pushState(entry, '');
}

/** Shows one step, moves focus to its heading (so screen readers announce it) and says where we are. */
function show(step: StepName): void {
  current = step;
  remember(step);
  for (const s of ORDER) stepEl(s).hidden = s !== step;
  const index = ORDER.indexOf(step);
  progress.hidden = step === 'welcome' || step === 'done';
  progress.textContent = `Step ${index} of ${ORDER.length - 2}: ${TITLES[step]}`;
  announce(statusLine, '');
  document.title = `${TITLES[step]} – sign up with ${preview?.merchantName ?? 'us'}`;
  stepEl(step).querySelector<HTMLElement>('h2')?.focus();
}

function fail(message: string): void {
  announce(alertBox, message);
}

/** A message instead of the wizard (bad, expired or withdrawn link). */
function stop(message: string): void {
  for (const s of ORDER) stepEl(s).hidden = true;
  progress.hidden = true;
  announce(statusLine, '');
  announce(alertBox, message);
  title.focus();
}

// ---- field errors: each input has an element `#<input id>-error` it is described by ----

function clearErrors(form: HTMLElement): void {
  for (const el of form.querySelectorAll('[aria-invalid]')) el.removeAttribute('aria-invalid');
  for (const slot of form.querySelectorAll<HTMLElement>('.field-error')) slot.textContent = '';
  announce(alertBox, '');
}

/**
 * Puts each message beside its field (`fieldIds` maps API field names to input ids), marks the
 * field invalid, announces a summary and focuses the first invalid field.
 */
function showErrors(form: HTMLElement, errors: FieldErrors, fieldIds: Record<string, string> = {}): void {
  const unplaced: string[] = [];
  let first: HTMLElement | undefined;
  for (const [field, messages] of Object.entries(errors)) {
    const id = fieldIds[field] ?? field;
    const slot = form.querySelector<HTMLElement>(`#${CSS.escape(id)}-error`);
    if (!slot) {
      unplaced.push(...messages);
      continue;
    }
    slot.textContent = messages.join(' ');
    const input = form.querySelector<HTMLElement>(`#${CSS.escape(id)}`);
    const target = input?.matches('input, textarea, select') ? input : input?.querySelector<HTMLElement>('input');
    if (input?.matches('input, textarea, select')) input.setAttribute('aria-invalid', 'true');
    first ??= target ?? undefined;
  }
  const count = Object.keys(errors).length;
  announce(alertBox, unplaced.length ? unplaced.join(' ') : `Please correct ${count === 1 ? 'the highlighted field' : `the ${count} highlighted fields`}.`);
  first?.focus();
}

const value = (id: string) => byId<HTMLInputElement>(id).value;
const optional = (id: string) => (value(id).trim() === '' ? null : value(id));

// ---- API ----

async function call(method: string, path: string, body?: unknown): Promise<ApiResult> {
  const res = await callApi(method, path, { token: customerToken, body });
  if (res.status === 401 && customerToken) {
    customerToken = '';
    sessionStorage.removeItem(TOKEN_KEY);
  }
  return res;
}

function problemMessage(res: ApiResult): string {
  if (res.status === 0) return 'We could not reach the service. Check your connection and try again.';
  if (res.status === 401) return 'Your session has ended. Please sign in again.';
  if (res.status === 410) return GONE[res.body?.reason as string] ?? GONE.Expired!;
  if (res.status >= 500) return 'Something went wrong on our side. Please try again in a moment.';
  return (res.body?.detail as string) || 'That did not work. Please try again.';
}

/**
 * Reads the wizard's state: 'ok'; 'signedOut' when the customer token was refused (the caller
 * asks the invitee to sign in again); 'stopped' when a message replaced the wizard (left shown).
 */
async function loadState(): Promise<'ok' | 'signedOut' | 'stopped'> {
  const res = await call('GET', `/api/onboard/${preview!.invitationId}`);
  if (res.status !== 200) {
    if (res.status === 401) return 'signedOut';
    stop(problemMessage(res));
    return 'stopped';
  }
  state = res.body as State;
  if (state.step !== 'Done' && GONE[state.status]) {
    stop(GONE[state.status]!);
    return 'stopped';
  }
  return 'ok';
}

/** The customer token was refused mid-wizard (it expired): back to the account step, in sign-in mode, saying why. */
function sessionEnded(): void {
  showAccount();
  fail(problemMessage({ status: 401, body: undefined }));
}

/** Binds the invitation to the signed-in customer, then resumes the wizard where it stands. */
async function acceptAndResume(): Promise<void> {
  const res = await call('POST', '/api/onboard/accept', { token: inviteToken });
  if (res.status === 401) return showAccount();
  if (res.status === 409) return stop('This invitation has already been used by another account. Sign in with the account you used before, or ask the business for a new invitation.');
  if (res.status !== 200) return stop(problemMessage(res));
  const loaded = await loadState();
  if (loaded === 'signedOut') return sessionEnded();
  if (loaded === 'ok') resume();
}

function resume(): void {
  const step = SERVER_STEPS[state!.step] ?? 'details';
  prepare(step);
  show(step);
}

// ---- steps ----

function prepare(step: StepName): void {
  if (step === 'details') prepareDetails();
  if (step === 'payment') preparePayment();
  if (step === 'plan') preparePlans();
  if (step === 'questions') prepareQuestions();
  if (step === 'review') prepareReview();
  if (step === 'done') prepareDone();
}

function showAccount(): void {
  const form = formOf('account');
  clearErrors(form);
  const signedIn = Boolean(customerToken && state);
  byId('account-signed-in').hidden = !signedIn;
  byId('account-fields').hidden = signedIn;
  if (signedIn) {
    byId('account-intro').textContent = '';
    byId('account-signed-in-text').textContent = `You are signed in${state?.email ? ` (invitation for ${state.email})` : ''}.`;
  } else {
    signIn = preview?.accountState === 'Claimed';
    renderAccountMode();
    if (preview?.email && !value('email')) byId<HTMLInputElement>('email').value = preview.email;
    if (!value('account-firstName')) byId<HTMLInputElement>('account-firstName').value = preview?.firstName ?? '';
    if (!value('account-lastName')) byId<HTMLInputElement>('account-lastName').value = preview?.lastName ?? '';
  }
  show('account');
}

function renderAccountMode(): void {
  byId('signup-fields').hidden = signIn;
  for (const id of ['account-firstName', 'account-lastName', 'dateOfBirth']) byId<HTMLInputElement>(id).disabled = signIn;
  byId<HTMLInputElement>('password').autocomplete = signIn ? 'current-password' : 'new-password';
  byId('password-hint').hidden = signIn;
  byId('account-intro').textContent = signIn
    ? 'This email already has an account. Sign in with its password.'
    : preview?.accountState === 'Unclaimed'
      ? 'Choose a password to claim the account we set up for you.'
      : 'Create an account to sign up.';
  byId('account-switch').textContent = signIn ? 'I need to create an account' : 'I already have an account';
}

async function submitAccount(): Promise<void> {
  const form = formOf('account');
  if (customerToken && state) return next();
  const fieldIds = { firstName: 'account-firstName', lastName: 'account-lastName' };
  const errors: FieldErrors = {};
  if (!value('email').trim()) errors.email = ['Enter your email address.'];
  if (!value('password')) errors.password = ['Enter your password.'];
  if (!signIn) {
    if (value('password') && value('password').length < 8) errors.password = ['Use at least 8 characters.'];
    if (!value('account-firstName').trim()) errors.firstName = ['Enter your first name.'];
    if (!value('account-lastName').trim()) errors.lastName = ['Enter your last name.'];
    if (!value('dateOfBirth')) errors.dateOfBirth = ['Enter your date of birth.'];
  }
  if (Object.keys(errors).length) return showErrors(form, errors, fieldIds);
  const res = signIn
    ? await callApi('POST', '/api/account/login', { body: { email: value('email'), password: value('password') } })
    : await callApi('POST', '/api/account/signup', {
        body: { email: value('email'), password: value('password'), firstName: value('account-firstName'), lastName: value('account-lastName'), dateOfBirth: value('dateOfBirth') },
      });
  if (res.status === 409 && !signIn) {
    signIn = true;
    renderAccountMode();
    return showErrors(form, { password: ['This email already has an account: enter its password to sign in.'] });
  }
  if (res.status === 401) return showErrors(form, { password: ['The email or password is not right.'] });
  // The lock lasts as long as the answer says (15 minutes after five wrong passwords): say so.
  if (res.status === 429) return fail(`Too many attempts. Please wait ${waitText(res.retryAfterSeconds)} and try again.`);
  if (res.status === 400) return showErrors(form, (res.body?.errors as FieldErrors) ?? {}, fieldIds);
  if (res.status !== 200) return fail(problemMessage(res));
  customerToken = res.body.token as string;
  sessionStorage.setItem(TOKEN_KEY, customerToken);
  // The account has a password now: signing in again (after the token expires) is a sign-in.
  if (preview) preview.accountState = 'Claimed';
  byId<HTMLInputElement>('password').value = '';
  await acceptAndResume();
}

function prepareDetails(): void {
  const d = state!.details;
  const fill = (id: string, v: string | null | undefined) => (byId<HTMLInputElement>(id).value = v ?? '');
  fill('firstName', d?.firstName ?? state!.firstName);
  fill('lastName', d?.lastName ?? state!.lastName);
  for (const f of ['phone', 'addressLine1', 'city', 'state', 'postCode', 'country']) fill(f, d?.[f] ?? (f === 'phone' ? state!.phone : null));
}

async function submitDetails(): Promise<void> {
  const form = formOf('details');
  const errors: FieldErrors = {};
  if (!value('firstName').trim()) errors.firstName = ['Enter your first name.'];
  if (!value('lastName').trim()) errors.lastName = ['Enter your last name.'];
  if (Object.keys(errors).length) return showErrors(form, errors);
  const body = {
    invitationId: state!.invitationId,
    firstName: value('firstName'),
    lastName: value('lastName'),
    phone: optional('phone'),
    addressLine1: optional('addressLine1'),
    city: optional('city'),
    state: optional('state'),
    postCode: optional('postCode'),
    country: optional('country'),
  };
  if (await save(form, 'PATCH', '/api/onboard/details', body)) await next();
}

function payType(): 'Card' | 'BankAccount' {
  return byId<HTMLInputElement>('pay-bank').checked ? 'BankAccount' : 'Card';
}

function renderPayType(): void {
  const bank = payType() === 'BankAccount';
  byId('card-fields').hidden = bank;
  byId('bank-fields').hidden = !bank;
}

function preparePayment(): void {
  const pm = state!.paymentMethod;
  const saved = byId('payment-saved');
  saved.hidden = !pm;
  if (pm) {
    saved.textContent =
      pm.type === 'Card'
        ? `Saved: ${pm.brand ?? 'Card'} ending ${pm.last4 ?? '····'}, expires ${String(pm.expiryMonth).padStart(2, '0')}/${pm.expiryYear}. Leave the fields empty to keep it.`
        : `Saved: bank account ${pm.accountName}, BSB ${pm.bsb}, ending ${pm.last4 ?? '····'}. Leave the fields empty to keep it.`;
    byId<HTMLInputElement>(pm.type === 'Card' ? 'pay-card' : 'pay-bank').checked = true;
  }
  renderPayType();
}

async function submitPayment(): Promise<void> {
  const form = formOf('payment');
  const type = payType();
  const entered = type === 'Card' ? value('cardNumber') + value('expiryMonth') + value('expiryYear') : value('accountName') + value('bsb') + value('accountNumber');
  if (state!.paymentMethod && !entered.trim()) return next();
  const result = type === 'Card' ? tokeniseCard(value('cardNumber'), value('expiryMonth'), value('expiryYear')) : tokeniseBank(value('accountName'), value('bsb'), value('accountNumber'));
  if ('errors' in result) return showErrors(form, result.errors);
  if (await save(form, 'POST', '/api/onboard/payment-method', { invitationId: state!.invitationId, ...result.method })) {
    // The full number never leaves this page; it is not kept in it either.
    for (const id of ['cardNumber', 'accountNumber']) byId<HTMLInputElement>(id).value = '';
    await next();
  }
}

function preparePlans(): void {
  const list = byId('plan-options');
  list.replaceChildren();
  if (!state!.plans.length) {
    list.textContent = 'There are no plans to choose from right now.';
    return;
  }
  state!.plans.forEach((plan, i) => {
    const wrap = document.createElement('div');
    wrap.className = 'choice';
    const input = document.createElement('input');
    Object.assign(input, { type: 'radio', name: 'planId', id: `plan-${i}`, value: plan.id, checked: plan.id === state!.planId, required: true });
    input.setAttribute('aria-describedby', 'plan-options-error');
    const label = document.createElement('label');
    label.htmlFor = input.id;
    label.textContent = `${plan.name} – ${formatPrice(plan)}${plan.trialDays ? ` (${plan.trialDays}-day free trial)` : ''}`;
    wrap.append(input, label);
    list.append(wrap);
  });
}

async function submitPlan(): Promise<void> {
  const form = formOf('plan');
  const chosen = form.querySelector<HTMLInputElement>('input[name="planId"]:checked');
  if (!chosen) return showErrors(form, { planId: ['Choose a plan.'] }, { planId: 'plan-options' });
  if (await save(form, 'PATCH', '/api/onboard/plan', { invitationId: state!.invitationId, planId: chosen.value }, { planId: 'plan-options' })) await next();
}

const questionErrorId = (q: Question) => `q-${q.id}`;

function prepareQuestions(): void {
  const list = byId('question-list');
  list.replaceChildren();
  const answers = new Map(state!.answers.map((a) => [a.questionId, a]));
  if (!state!.questions.length) list.textContent = 'There are no questions for this plan.';
  for (const q of state!.questions) {
    const a = answers.get(q.id);
    const id = questionErrorId(q);
    const error = document.createElement('p');
    error.className = 'field-error';
    error.id = `${id}-error`;
    const mark = (el: HTMLElement) => {
      if (!q.required) return;
      const star = document.createElement('span');
      star.className = 'required';
      star.textContent = ' * (required)';
      el.append(star);
    };
    if (q.kind === 'Text') {
      const field = document.createElement('div');
      field.className = 'field question';
      const label = document.createElement('label');
      label.htmlFor = id;
      label.textContent = q.text;
      mark(label);
      const input = document.createElement('input');
      Object.assign(input, { type: 'text', id, name: id, value: a?.textValue ?? '', required: q.required });
      input.dataset.questionId = q.id;
      if (q.required) input.setAttribute('aria-required', 'true');
      input.setAttribute('aria-describedby', error.id);
      field.append(label, input, error);
      list.append(field);
      continue;
    }
    const fieldset = document.createElement('fieldset');
    fieldset.className = 'question';
    fieldset.id = id;
    fieldset.dataset.questionId = q.id;
    fieldset.setAttribute('aria-describedby', error.id);
    const legend = document.createElement('legend');
    legend.textContent = q.text;
    mark(legend);
    fieldset.append(legend);
    q.options.forEach((o, i) => {
      const wrap = document.createElement('div');
      wrap.className = 'choice';
      const input = document.createElement('input');
      Object.assign(input, { type: q.kind === 'SingleChoice' ? 'radio' : 'checkbox', id: `${id}-${i}`, name: id, value: o.id, checked: a?.optionIds.includes(o.id) ?? false });
      if (q.kind === 'SingleChoice' && q.required) input.required = true;
      const label = document.createElement('label');
      label.htmlFor = input.id;
      label.textContent = o.label;
      wrap.append(input, label);
      fieldset.append(wrap);
    });
    fieldset.append(error);
    list.append(fieldset);
  }
}

function collectAnswers(): Answer[] {
  const form = formOf('questions');
  return state!.questions.map((q) => {
    if (q.kind === 'Text') {
      const text = form.querySelector<HTMLInputElement>(`#${CSS.escape(questionErrorId(q))}`)!.value;
      return { questionId: q.id, textValue: text === '' ? null : text, optionIds: [] };
    }
    const checked = [...form.querySelectorAll<HTMLInputElement>(`input[name="${CSS.escape(questionErrorId(q))}"]:checked`)].map((i) => i.value);
    return { questionId: q.id, textValue: null, optionIds: checked };
  });
}

/** API errors `answers.<questionId>` → the question's element. */
const answerFieldIds = () => Object.fromEntries(state!.questions.map((q) => [`answers.${q.id}`, questionErrorId(q)]));

async function submitQuestions(): Promise<void> {
  const form = formOf('questions');
  const answers = collectAnswers();
  const errors: FieldErrors = {};
  for (const q of state!.questions) {
    const a = answers.find((x) => x.questionId === q.id)!;
    if (q.required && !(a.textValue?.trim() || a.optionIds.length)) errors[`answers.${q.id}`] = [q.kind === 'Text' ? 'This question needs an answer.' : 'Choose an option.'];
  }
  if (Object.keys(errors).length) return showErrors(form, errors, answerFieldIds());
  if (await save(form, 'PATCH', '/api/onboard/answers', { invitationId: state!.invitationId, answers }, answerFieldIds())) await next();
}

function prepareReview(): void {
  const list = byId('review-list');
  list.replaceChildren();
  const add = (term: string, desc: string) => {
    const dt = document.createElement('dt');
    dt.textContent = term;
    const dd = document.createElement('dd');
    dd.textContent = desc;
    list.append(dt, dd);
  };
  const s = state!;
  if (s.details) add('Name', `${s.details.firstName} ${s.details.lastName}`);
  if (s.details?.phone) add('Phone', s.details.phone);
  const pm = s.paymentMethod;
  if (pm) add('Payment method', pm.type === 'Card' ? `${pm.brand ?? 'Card'} ending ${pm.last4 ?? '····'}` : `Bank account ${pm.accountName}, BSB ${pm.bsb}, ending ${pm.last4 ?? '····'}`);
  const plan = s.plans.find((p) => p.id === s.planId);
  if (plan) add('Plan', `${plan.name} – ${formatPrice(plan)}`);
  const answers = new Map(s.answers.map((a) => [a.questionId, a]));
  for (const q of s.questions) {
    const a = answers.get(q.id);
    const text = q.kind === 'Text' ? (a?.textValue ?? '') : q.options.filter((o) => a?.optionIds.includes(o.id)).map((o) => o.label).join(', ');
    add(q.text, text || 'Not answered');
  }
}

async function submitReview(): Promise<void> {
  const form = formOf('review');
  const res = await withBusy(form, () => call('POST', '/api/onboard/complete', { invitationId: state!.invitationId }));
  if (!res) return;
  if (res.status === 200) {
    await loadState();
    prepareDone();
    return show('done');
  }
  if (res.status === 400 && res.body?.errors) {
    const errors = res.body.errors as FieldErrors;
    await loadState();
    const keys = Object.keys(errors);
    const target: StepName = keys.includes('details') ? 'details' : keys.includes('paymentMethod') ? 'payment' : keys.includes('planId') ? 'plan' : 'questions';
    prepare(target);
    show(target);
    const fieldIds = target === 'questions' ? answerFieldIds() : { planId: 'plan-options' };
    return showErrors(formOf(target), target === 'questions' ? errors : { [keys[0]!]: errors[keys[0]!]! }, fieldIds);
  }
  if (res.status === 410) return stop(problemMessage(res));
  if (res.status === 401) return sessionEnded();
  fail(problemMessage(res));
}

function prepareDone(): void {
  // Nothing is left to do with the account here: the tab no longer keeps its token (an hour's
  // access to the account's profile), which a later user of the browser would otherwise find in
  // a reloaded or reopened tab. A reload now says the invitation is complete.
  customerToken = '';
  sessionStorage.removeItem(TOKEN_KEY);
  const plan = state?.plans.find((p) => p.id === state?.planId);
  byId('done-text').textContent = `Welcome aboard! Your membership with ${state?.merchantName ?? preview?.merchantName}${plan ? ` on the ${plan.name} plan` : ''} is active.`;
}

/** Runs a request with the form's buttons marked busy; refuses a second submit meanwhile. */
async function withBusy<T>(form: HTMLElement, run: () => Promise<T>): Promise<T | undefined> {
  if (busy) return undefined;
  busy = true;
  const buttons = [...form.querySelectorAll<HTMLButtonElement>('button')];
  for (const b of buttons) b.setAttribute('aria-disabled', 'true');
  announce(statusLine, 'Saving…');
  try {
    return await run();
  } finally {
    busy = false;
    for (const b of buttons) b.removeAttribute('aria-disabled');
    announce(statusLine, '');
  }
}

/** Saves a step; shows its errors and answers false when it did not save. */
async function save(form: HTMLElement, method: string, path: string, body: unknown, fieldIds: Record<string, string> = {}): Promise<boolean> {
  const res = await withBusy(form, () => call(method, path, body));
  if (!res) return false;
  if (res.status === 204) return true;
  if (res.status === 400 && res.body?.errors) showErrors(form, res.body.errors as FieldErrors, fieldIds);
  else if (res.status === 410) stop(problemMessage(res));
  else if (res.status === 401) sessionEnded();
  else fail(problemMessage(res));
  return false;
}

async function next(): Promise<void> {
  const loaded = await loadState();
  if (loaded === 'signedOut') return sessionEnded();
  if (loaded === 'stopped') return;
  const after = ORDER[ORDER.indexOf(current) + 1] ?? 'done';
  // Never past where the server says the wizard stands (a step may have been left unsaved).
  const resumeAt = SERVER_STEPS[state!.step] ?? 'details';
  const step = ORDER.indexOf(after) <= ORDER.indexOf(resumeAt) ? after : resumeAt;
  prepare(step);
  show(step);
}

function back(): void {
  const before = ORDER[ORDER.indexOf(current) - 1] ?? 'welcome';
  if (before === 'account') return showAccount();
  clearErrors(stepEl(before));
  if (before !== 'welcome') prepare(before);
  show(before);
}

/**
 * The browser's Back or Forward to a step of this wizard: shown as the wizard's own Back shows it,
 * never past where the server says the wizard stands. A completed wizard stays on its last step
 * (nothing before it can change any more); a step being saved finishes first.
 */
function onHistory(event: PopStateEvent): void {
  const target = (event.state as { onboardStep?: StepName } | null)?.onboardStep;
  if (!target || !ORDER.includes(target)) return;
  fromHistory = true;
  try {
    if (busy || current === 'done') return remember(current);
    if (target === 'welcome') return show('welcome');
    if (target === 'account' || !customerToken || !state) return showAccount();
    const resumeAt = SERVER_STEPS[state.step] ?? 'details';
    const step = ORDER.indexOf(target) <= ORDER.indexOf(resumeAt) ? target : resumeAt;
    clearErrors(stepEl(step));
    prepare(step);
    show(step);
  } finally {
    fromHistory = false;
  }
}

// ---- wiring ----

window.addEventListener('popstate', onHistory);

/**
 * True while a step's Continue is being handled, from its first request to the step it shows:
 * a second press meanwhile (a double click, Enter twice) sends nothing. Without it a second
 * sign-up of the same email answered 409 after the first had signed in, and its "already has
 * an account" error was announced over the next step.
 */
let submitting = false;

for (const s of ORDER) {
  const el = stepEl(s);
  el.querySelector('.back')?.addEventListener('click', back);
  if (el instanceof HTMLFormElement) {
    el.addEventListener('submit', (e) => {
      e.preventDefault();
      if (submitting) return;
      submitting = true;
      clearErrors(el);
      const handlers: Partial<Record<StepName, () => Promise<void>>> = {
        account: submitAccount,
        details: submitDetails,
        payment: submitPayment,
        plan: submitPlan,
        questions: submitQuestions,
        review: submitReview,
      };
      void (handlers[s]?.() ?? Promise.resolve()).finally(() => (submitting = false));
    });
  }
}
byId('welcome-continue').addEventListener('click', () => (customerToken && state ? resume() : showAccount()));
byId('account-switch').addEventListener('click', () => {
  signIn = !signIn;
  clearErrors(formOf('account'));
  renderAccountMode();
  byId<HTMLInputElement>('email').focus();
});
for (const id of ['pay-card', 'pay-bank']) byId(id).addEventListener('change', renderPayType);
byId<HTMLInputElement>('cardNumber').addEventListener('input', (e) => {
  const digits = (e.target as HTMLInputElement).value.replace(/\D/g, '');
  const brand = cardBrand(digits);
  byId('cardNumber-error').textContent = digits.length >= 12 && !isLuhnValid(digits) ? 'This card number does not look right.' : '';
  byId('cardNumber').setAttribute('aria-label', brand ? `Card number (${brand})` : 'Card number');
});

async function load(): Promise<void> {
  if (!inviteToken) return stop('This link has no invitation in it. Open the whole link from your invitation email or message.');
  const res = await callApi('POST', '/api/onboard/preview', { body: { token: inviteToken } });
  if (res.status === 404) return stop('We could not find this invitation. Check that you opened the whole link from your invitation.');
  if (res.status !== 200) return stop(problemMessage(res));
  preview = res.body as Preview;
  title.textContent = `Sign up with ${preview.merchantName}`;
  byId('welcome-text').textContent = `Hello ${preview.firstName}, ${preview.merchantName} invited you to become a member. It takes a few minutes: your details, a payment method, a plan and a few questions.`;
  if (customerToken) {
    const accepted = await call('POST', '/api/onboard/accept', { token: inviteToken });
    if (accepted.status === 200) {
      const loaded = await loadState();
      if (loaded === 'ok') return resume();
      if (loaded === 'stopped') return;
    }
    if (accepted.status !== 401 && accepted.status !== 200) return stop(problemMessage(accepted));
  }
  // Nothing is left to do with a completed invitation (there is no sign-in here to offer).
  if (preview.status === 'Completed') return stop(`This invitation has already been completed: your membership with ${preview.merchantName} is set up, and there is nothing more to do here.`);
  show('welcome');
}

void load();
