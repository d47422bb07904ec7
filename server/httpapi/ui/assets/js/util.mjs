// Small helpers the views share.
import { html } from './html.mjs';

/** 'JOB_STATUS_RUNNING' with prefix 'JOB_STATUS_' -> 'running'. */
export function enumName(v, prefix) {
  if (!v) return '';
  return v.startsWith(prefix) ? v.slice(prefix.length).toLowerCase().replaceAll('_', ' ') : v;
}

/** The class a status gets: ok, warn or bad. */
export function tone(s) {
  if (['running', 'complete', 'successful', 'ready', 'healthy', 'leader', 'follower'].includes(s)) return 'ok';
  if (['failed', 'lost', 'dead', 'down', 'unhealthy', 'cancelled'].includes(s)) return 'bad';
  return 'warn';
}

export function Status({ value }) {
  return html`<span class=${`status ${tone(value)}`}>${value}</span>`;
}

/** The API's refusal, as it said it. */
export function ErrorBox({ error }) {
  if (!error) return null;
  return html`<div class="error" role="alert">${error.code ? `${error.code}: ` : ''}${error.message}</div>`;
}
