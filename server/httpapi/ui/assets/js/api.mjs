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

/** An answer of the API that was not 2xx, with the API's own message and,
 * for a refusal that says when to come back, retryAfterMs. */
export class APIError extends Error {
  constructor(status, code, message, retryAfterMs = null) {
    super(message);
    this.status = status;
    this.code = code;
    this.retryAfterMs = retryAfterMs;
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
    body?.message || `${resp.status} ${resp.statusText}`, retryDelay(resp, body));
}

/** When a refusal says to retry: the RetryInfo detail's delay ("1.500s"),
 * else the Retry-After header's seconds; null when it says nothing. */
function retryDelay(resp, body) {
  const info = (body?.details || []).find((d) => (d['@type'] || '').endsWith('google.rpc.RetryInfo'));
  const s = parseFloat(info?.retry_delay ?? resp.headers.get('Retry-After') ?? '');
  return Number.isFinite(s) ? s * 1000 : null;
}

// A read refused because the server is busy (429) or has no leader for
// the moment (503) is tried again after the delay the server asks for, a
// few times: a view makes several reads at once, and a server bounds the
// list reads it answers at a time (docs/operations.md, "Limits").
const readAttempts = 5;
const retryable = [429, 503];

/** Resolves after ms, or rejects at once when signal aborts. */
function pause(ms, signal) {
  return new Promise((resolve, reject) => {
    const timer = setTimeout(resolve, ms);
    signal?.addEventListener('abort', () => {
      clearTimeout(timer);
      reject(new DOMException('aborted', 'AbortError'));
    }, { once: true });
  });
}

/** GET path; resolves to { body, index } (index from X-Drover-Index).
 * Busy and leaderless refusals are retried as the server asks. */
export async function get(path, { signal } = {}) {
  for (let attempt = 1; ; attempt++) {
    const resp = await fetch(path, { headers: headers(), signal });
    if (resp.ok) return { body: await resp.json(), index: Number(resp.headers.get('X-Drover-Index') || 0) };
    const err = await errorOf(resp);
    if (!retryable.includes(resp.status) || attempt === readAttempts) throw err;
    await pause(Math.min(err.retryAfterMs ?? 250 * 2 ** attempt, 5000), signal);
  }
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
