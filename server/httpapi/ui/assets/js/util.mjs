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

const durationUnits = { h: 3600, m: 60, s: 1, ms: 0.001 };

/** A duration as people write it ("10m", "1h30m", "45s", "90") in the
 * form the API reads ("600s"); throws on anything else. A bare number is
 * seconds. */
export function toDuration(text) {
  const t = text.trim();
  if (/^\d+(\.\d+)?$/.test(t)) return `${Number(t)}s`;
  const parts = [...t.matchAll(/(\d+(?:\.\d+)?)(ms|h|m|s)/g)];
  if (!t || parts.map((p) => p[0]).join('') !== t) {
    throw new Error(`"${text}" is not a duration: write it as 90s, 10m or 1h30m`);
  }
  const seconds = parts.reduce((sum, [, n, unit]) => sum + Number(n) * durationUnits[unit], 0);
  return `${Number(seconds.toFixed(3))}s`;
}
