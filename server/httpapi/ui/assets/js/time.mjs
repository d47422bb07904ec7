// Times as the API sends them: Unix nanoseconds in int64 fields, which
// protojson writes as strings. Shown in UTC to the second, as the CLI
// prints times, so that both read the same.
import { html } from './html.mjs';

/** The instant of ns, or null when unset. BigInt: nanoseconds since 1970
 * are beyond a double's exact integers. */
function instant(ns) {
  if (!ns || ns === '0') return null;
  return new Date(Number(BigInt(ns) / 1000000n));
}

/** ns as text ('2026-11-27 09:00:00Z'); '' when unset. */
export function formatTime(ns) {
  const d = instant(ns);
  return d ? `${d.toISOString().replace('T', ' ').slice(0, 19)}Z` : '';
}

/** A <time> element; '—' when unset. */
export function Time({ ns }) {
  const d = instant(ns);
  return d ? html`<time datetime=${d.toISOString()}>${formatTime(ns)}</time>` : '—';
}
