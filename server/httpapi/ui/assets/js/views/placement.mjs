// Why a task group's allocations could not be placed, as the scheduler
// counted it (PlacementFailure): nodes evaluated, filtered per reason,
// exhausted per resource dimension, and available per datacenter.
import { html } from '../html.mjs';

/** Largest count first, so the main reason leads. */
const byCount = (m) => Object.entries(m || {}).sort((x, y) => y[1] - x[1]);

function Group({ f }) {
  const n = f.unplaced || 0;
  return html`
    <section class="placement" data-group=${f.task_group}>
      <h3>Group ${f.task_group}: ${n} allocation${n === 1 ? '' : 's'} not placed</h3>
      <table>
        <thead><tr><th>Nodes</th><th>Count</th></tr></thead>
        <tbody>
          <tr data-metric="evaluated"><td>evaluated</td><td>${f.nodes_evaluated || 0}</td></tr>
          <tr data-metric="filtered"><td>filtered</td><td>${f.nodes_filtered || 0}</td></tr>
          ${byCount(f.filtered_by).map(([reason, count]) => html`
            <tr key=${`f ${reason}`} data-filtered=${reason} class="sub"><td>by ${reason}</td><td>${count}</td></tr>`)}
          <tr data-metric="exhausted"><td>exhausted</td><td>${f.nodes_exhausted || 0}</td></tr>
          ${byCount(f.exhausted_by).map(([dim, count]) => html`
            <tr key=${`e ${dim}`} data-exhausted=${dim} class="sub"><td>on ${dim}</td><td>${count}</td></tr>`)}
          ${byCount(f.nodes_available).map(([dc, count]) => html`
            <tr key=${`a ${dc}`} data-available=${dc}><td>available in ${dc}</td><td>${count}</td></tr>`)}
        </tbody>
      </table>
    </section>`;
}

export function PlacementFailures({ failures }) {
  return failures.map((f) => html`<${Group} key=${f.task_group} f=${f} />`);
}
