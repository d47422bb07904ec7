// The text around the topology canvas: nodes per status and the cluster's
// totals (as text, so that people and tests can read them), and the
// legend of the drawing's colours and marks.
import { html } from '../html.mjs';

const statuses = ['ready', 'initializing', 'down', 'disconnected'];

const fmt = (n) => n.toLocaleString();
const pct = (used, cap) => (cap > 0 ? ` (${Math.round((100 * used) / cap)}%)` : '');

/** A figure with its raw value in data-value, for tests. */
function Figure({ name, value, cls = '' }) {
  return html`<b class=${cls} data-count=${name} data-value=${value}>${fmt(value)}</b>`;
}

/** c: Topology.counts(). */
export function Counts({ c }) {
  return html`
    <p id="topology-counts">
      <${Figure} name="total" value=${c.total} /> nodes:
      ${statuses.map((s) => html` <${Figure} name=${s} value=${c[s] || 0} cls=${`st-${s}`} /> ${s} ·`)}
      ${' '}<${Figure} name="ineligible" value=${c.ineligible} /> ineligible ·
      ${' '}<${Figure} name="draining" value=${c.draining} /> draining
    </p>
    <p id="topology-usage" class="muted">
      In use: CPU <${Figure} name="cpu-used" value=${c.cpuUsed} /> of ${fmt(c.cpuCap)} MHz${pct(c.cpuUsed, c.cpuCap)},
      memory <${Figure} name="memory-used" value=${c.memUsed} /> of ${fmt(c.memCap)} MB${pct(c.memUsed, c.memCap)}
    </p>`;
}

export function Legend() {
  return html`
    <p class="legend muted">
      Status: ${statuses.map((s) => html`<span class=${`swatch st-${s}`}></span>${s} `)}
      · top edge: <span class="swatch edge-ineligible"></span>ineligible <span class="swatch edge-draining"></span>draining
    </p>
    <p class="muted">Each cell is a node: its left bar is the CPU, its right bar the memory in use, as a share of what
      the node offers. Point at a cell for its figures; click it to open the node.</p>`;
}
