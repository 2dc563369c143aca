import type { FieldErrors } from './api.js';

/**
 * Field errors beside their fields: each input `#<name>` has a `#<name>-error` element it is
 * described by. Errors set `aria-invalid`; the first invalid field gets focus so screen-reader
 * and keyboard users land on it.
 */
export function showFieldErrors(form: HTMLFormElement, errors: FieldErrors): string[] {
  const unplaced: string[] = [];
  let first: HTMLElement | undefined;
  for (const [field, messages] of Object.entries(errors)) {
    const input = form.querySelector<HTMLInputElement>(`[name="${CSS.escape(field)}"]`);
    const slot = form.querySelector<HTMLElement>(`#${CSS.escape(field)}-error`);
    if (!input || !slot) {
      unplaced.push(...messages);
      continue;
    }
    input.setAttribute('aria-invalid', 'true');
    slot.textContent = messages.join(' ');
    first ??= input;
  }
  first?.focus();
  return unplaced;
}

export function clearFieldErrors(form: HTMLFormElement): void {
  for (const input of form.querySelectorAll('[aria-invalid]')) input.removeAttribute('aria-invalid');
  for (const slot of form.querySelectorAll<HTMLElement>('.field-error')) slot.textContent = '';
}

/** Shows `message` in a live region (or hides it when empty). */
export function announce(region: HTMLElement, message: string): void {
  region.textContent = message;
  region.hidden = message === '';
}

/**
 * Runs `action` on the form's submit, one at a time (a double click sends one request), with the
 * form and its button marked busy meanwhile; `onError` answers an action that threw (the network).
 */
export function onSubmit(form: HTMLFormElement, button: HTMLButtonElement, action: () => Promise<void>, onError: () => void): void {
  let busy = false;
  form.addEventListener('submit', (event) => {
    event.preventDefault();
    if (busy) return;
    busy = true;
    button.setAttribute('aria-disabled', 'true');
    form.setAttribute('aria-busy', 'true');
    action()
      .catch(onError)
      .finally(() => {
        busy = false;
        button.removeAttribute('aria-disabled');
        form.removeAttribute('aria-busy');
      });
  });
}

export function byId<T extends HTMLElement = HTMLElement>(id: string): T {
  const el = document.getElementById(id);
  if (!el) throw new Error(`#${id} is missing from the page`);
  return el as T;
}
