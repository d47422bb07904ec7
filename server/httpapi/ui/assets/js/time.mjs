// Times as the API sends them: Unix nanoseconds in int64 fields, which
// protojson writes as strings.
import { html } from './html.mjs';

/** A <time> in the browser's locale, UTC ISO on hover; '—' when unset. */
export function Time({ ns }) {
  if (!ns || ns === '0') return '—';
  // BigInt: nanoseconds since 1970 are beyond a double's exact integers.
  const d = new Date(Number(BigInt(ns) / 1000000n));
  const iso = d.toISOString();
  return html`<time datetime=${iso} title=${iso}>${d.toLocaleString()}</time>`;
}
