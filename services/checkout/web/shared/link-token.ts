/** The one-time token of an emailed link (`?token=...`), held by the page that opened it. */
export interface LinkToken {
  /** The token, or '' when the page was opened without one. */
  readonly value: string;
  /** Drops the token once the API has used it up (or refused it for good). */
  forget(): void;
}

/**
 * Takes the `token` of an emailed link out of the address bar, so it is not left in the
 * browser's history, a bookmark or a shared address, and keeps it in this tab's sessionStorage
 * under `key`, so a reload before it is used still works. A token in the address wins over a
 * kept one (a second link opened in the same tab).
 */
export function takeLinkToken(key: string): LinkToken {
  const { token } = takeLinkParams(key, ['token'] as const);
  return { value: token, forget: () => sessionStorage.removeItem(key) };
}

/**
 * The parameters `names` of the page's link (an emailed link's `token`, a checkout deep link's
 * `d` and `s`), taken out of the address bar and kept in this tab's sessionStorage under `key`,
 * so a reload still finds them: the link, once in the history, is all a later user of the browser
 * needs to open the session again. Parameters in the address win over kept ones (a second link
 * opened in the same tab); '' for one given in neither.
 */
export function takeLinkParams<N extends string>(key: string, names: readonly N[]): Record<N, string> {
  const url = new URL(location.href);
  const fromLink = names.some((n) => url.searchParams.has(n));
  if (fromLink) {
    const taken = Object.fromEntries(names.map((n) => [n, url.searchParams.get(n) ?? ''])) as Record<N, string>;
    for (const n of names) url.searchParams.delete(n);
    history.replaceState(history.state, '', `${url.pathname}${url.search}${url.hash}`);
    sessionStorage.setItem(key, JSON.stringify(taken));
    return taken;
  }
  let kept: Partial<Record<N, unknown>> = {};
  try {
    kept = JSON.parse(sessionStorage.getItem(key) ?? '{}') as Partial<Record<N, unknown>>;
  } catch {
    // Not ours: as if nothing were kept.
  }
  return Object.fromEntries(names.map((n) => [n, typeof kept[n] === 'string' ? kept[n] : ''])) as Record<N, string>;
}
