// Times as the API sends them: Unix nanoseconds in int64 fields, which
// protojson writes as strings.
import { html } from './html.mjs';

/** A <time> in UTC to the second, as the CLI prints times, so that both
 * read the same; '—' when unset. */
export function Time({ ns }) {
  if (!ns || ns === '0') return '—';
  // BigInt: nanoseconds since 1970 are beyond a double's exact integers.
  const iso = new Date(Number(BigInt(ns) / 1000000n)).toISOString();
  return html`<time datetime=${iso}>${iso.replace('T', ' ').slice(0, 19)}Z</time>`;
}
