// The HTTP/JSON API under /v1/ (docs/api.md): the only way the UI reads or
// writes, with the token the operator typed into the token box.

const tokenKey = 'drover.token';

/** The ACL token secret of this tab ('' for none). Session storage: it is
 * gone when the tab closes and never shared with other tabs. */
export function getToken() {
  return sessionStorage.getItem(tokenKey) || '';
}

/** Stores the token and tells the views to load again with it. */
export function setToken(secret) {
  if (secret) sessionStorage.setItem(tokenKey, secret);
  else sessionStorage.removeItem(tokenKey);
  window.dispatchEvent(new Event('drover-token'));
}

/** An answer of the API that was not 2xx, with the API's own message. */
export class APIError extends Error {
  constructor(status, code, message) {
    super(message);
    this.status = status;
    this.code = code;
  }
}

function headers(extra) {
  const h = { Accept: 'application/json', ...extra };
  const t = getToken();
  if (t) h['X-Drover-Token'] = t;
  return h;
}

async function errorOf(resp) {
  let body = null;
  try {
    body = await resp.json();
  } catch {
    // Not the API's JSON error (a proxy's page, say): status line only.
  }
  return new APIError(resp.status, body?.error || String(resp.status),
    body?.message || `${resp.status} ${resp.statusText}`);
}

/** GET path; resolves to { body, index } (index from X-Drover-Index). */
export async function get(path, { signal } = {}) {
  const resp = await fetch(path, { headers: headers(), signal });
  if (!resp.ok) throw await errorOf(resp);
  return { body: await resp.json(), index: Number(resp.headers.get('X-Drover-Index') || 0) };
}

/** GET every page of a list; key names the array in each answer. */
export async function getAll(path, key, { signal } = {}) {
  const items = [];
  let next = '';
  for (;;) {
    const sep = path.includes('?') ? '&' : '?';
    const { body } = await get(next ? `${path}${sep}next_token=${encodeURIComponent(next)}` : path, { signal });
    items.push(...(body[key] || []));
    next = body.next_token || '';
    if (!next) return items;
  }
}

/** A write (POST, PUT, DELETE); resolves to the answer's JSON. */
export async function write(method, path, body) {
  const resp = await fetch(path, {
    method,
    headers: headers({ 'Content-Type': 'application/json' }),
    body: body === undefined ? undefined : JSON.stringify(body),
  });
  if (!resp.ok) throw await errorOf(resp);
  return resp.json();
}
