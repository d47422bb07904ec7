// One event stream (GET /v1/event/stream, newline-delimited JSON) per tab,
// shared by every view: a view says which topics it shows and is told when
// a batch touches one of them. The stream resumes from the last index it
// read after an error, so a reconnect misses nothing the server still holds.
import { getToken } from './api.mjs';

const listeners = new Set();
const stateListeners = new Set();
// 'connecting' until the answer's headers come (the server sends them with
// the first batch, docs/api.md), 'live' after, 'down' after an error,
// 'refused' when the token may not read the stream (refusal says why).
let state = 'connecting';
let refusal = '';
let started = false;

/** Calls fn(batch) for every batch with an event of one of topics
 * ('TOPIC_JOB', ...); returns the function that stops it. */
export function onEvents(topics, fn) {
  const l = { topics: new Set(topics), fn };
  listeners.add(l);
  start();
  return () => listeners.delete(l);
}

/** Calls fn(state, refusal) with the stream's state now and when it
 * changes: 'connecting', 'live', 'down' or 'refused' (with the API's
 * reason). */
export function onStreamState(fn) {
  stateListeners.add(fn);
  fn(state, refusal);
  return () => stateListeners.delete(fn);
}

function setState(v, why = '') {
  if (v === state && why === refusal) return;
  state = v;
  refusal = why;
  for (const fn of stateListeners) fn(v, why);
}

// The gRPC codes of a refused token, by number, as a stream's error
// carries them.
const refusalCodes = { 7: 'PERMISSION_DENIED', 16: 'UNAUTHENTICATED' };

/** The stream's answer was an HTTP error: the API's reason, and whether
 * the token was refused (which a retry with the same token won't fix). */
class StreamError extends Error {
  constructor(status, message) {
    super(message);
    this.refused = status === 401 || status === 403;
  }
}

function deliver(batch) {
  const topics = new Set((batch.events || []).map((e) => e.topic));
  for (const l of listeners) {
    if ([...l.topics].some((t) => topics.has(t))) l.fn(batch);
  }
}

async function readStream(from, signal) {
  const headers = { Accept: 'application/x-ndjson' };
  const t = getToken();
  if (t) headers['X-Drover-Token'] = t;
  setState('connecting');
  const resp = await fetch(`/v1/event/stream${from ? `?index=${from}` : ''}`, { headers, signal });
  if (!resp.ok) {
    // The API's error JSON ({error, message}), possibly wrapped as a
    // stream's error ({error: {...}}).
    const body = await resp.json().catch(() => null);
    const e = body && typeof body.error === 'object' ? body.error : body;
    const code = typeof e?.error === 'string' ? e.error : refusalCodes[e?.code] || resp.status;
    throw new StreamError(resp.status, e?.message ? `${code}: ${e.message}` : `${resp.status} ${resp.statusText}`);
  }
  setState('live');
  const reader = resp.body.pipeThrough(new TextDecoderStream()).getReader();
  let buf = '';
  let last = from;
  for (;;) {
    const { value, done } = await reader.read();
    if (done) return last;
    buf += value;
    let nl;
    while ((nl = buf.indexOf('\n')) >= 0) {
      const line = buf.slice(0, nl).trim();
      buf = buf.slice(nl + 1);
      if (!line) continue;
      const msg = JSON.parse(line);
      if (msg.error) throw new Error(`event stream: ${msg.error.message}`);
      const batch = msg.result || {};
      last = Number(batch.index || last);
      deliver(batch);
    }
  }
}

/** Resolves after ms, or at once when signal aborts. */
function sleep(ms, signal) {
  return new Promise((resolve) => {
    const timer = setTimeout(resolve, ms);
    signal.addEventListener('abort', () => {
      clearTimeout(timer);
      resolve();
    }, { once: true });
  });
}

async function run() {
  let from = 0;
  let delay = 500;
  let ctl = new AbortController();
  // A new token may see other events: reconnect with it at once, also
  // while backing off after a refusal.
  window.addEventListener('drover-token', () => ctl.abort());
  for (;;) {
    try {
      from = await readStream(from, ctl.signal);
      delay = 500;
    } catch (e) {
      // Dropped, refused or aborted: show it and try again, backing off.
      // The views keep what they have and load again on the next batch;
      // while refused they poll instead (live.mjs).
      if (!ctl.signal.aborted) setState(e.refused ? 'refused' : 'down', e.refused ? e.message : '');
    }
    if (!ctl.signal.aborted) {
      await sleep(delay, ctl.signal);
      delay = Math.min(delay * 2, 10000);
    }
    if (ctl.signal.aborted) {
      ctl = new AbortController();
      delay = 500;
    }
    // Whatever was missed while down: tell everyone to load again.
    deliver({ events: [...new Set([...listeners].flatMap((l) => [...l.topics]))].map((topic) => ({ topic })) });
  }
}

function start() {
  if (started) return;
  started = true;
  run();
}
