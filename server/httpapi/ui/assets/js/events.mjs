// One event stream (GET /v1/event/stream, newline-delimited JSON) per tab,
// shared by every view: a view says which topics it shows and is told when
// a batch touches one of them. The stream resumes from the last index it
// read after an error, so a reconnect misses nothing the server still holds.
import { getToken } from './api.mjs';

const listeners = new Set();
const stateListeners = new Set();
// 'connecting' until the answer's headers come (the server sends them with
// the first batch, docs/api.md), 'live' after, 'down' after an error.
let state = 'connecting';
let started = false;

/** Calls fn(batch) for every batch with an event of one of topics
 * ('TOPIC_JOB', ...); returns the function that stops it. */
export function onEvents(topics, fn) {
  const l = { topics: new Set(topics), fn };
  listeners.add(l);
  start();
  return () => listeners.delete(l);
}

/** Calls fn(state) with the stream's state now and when it changes:
 * 'connecting', 'live' or 'down'. */
export function onStreamState(fn) {
  stateListeners.add(fn);
  fn(state);
  return () => stateListeners.delete(fn);
}

function setState(v) {
  if (v === state) return;
  state = v;
  for (const fn of stateListeners) fn(v);
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
  if (!resp.ok) throw new Error(`event stream: ${resp.status}`);
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
    } catch {
      // Dropped, refused or aborted: show it and try again, backing off.
      // The views keep what they have and load again on the next batch.
      if (!ctl.signal.aborted) setState('down');
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
