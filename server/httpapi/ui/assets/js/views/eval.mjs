// Evaluation view: one evaluation's status, trigger, links, what it waits
// for, and why placement failed. Loads again on events about it only.
import { html } from '../html.mjs';
import { get } from '../api.mjs';
import { useLive } from '../live.mjs';
import { EvalLink, JobLink, NodeLink } from '../links.mjs';
import { Time } from '../time.mjs';
import { ErrorBox, Status, enumName } from '../util.mjs';
import { evalStatus, evalTrigger } from './evals.mjs';
import { PlacementFailures } from './placement.mjs';

const evalPath = (id) => `/v1/evaluation/${encodeURIComponent(id)}`;

/** The evaluation and the placement failures that explain it. A blocked
 * evaluation is created without failures of its own (they are on the
 * evaluation that left it behind) until a retry records new ones. */
async function load(id, signal) {
  const ev = (await get(evalPath(id), { signal })).body.evaluation;
  let why = { failures: ev.placement_failures || [], from: ev.id };
  if (!why.failures.length && ev.status === 'EVAL_STATUS_BLOCKED' && ev.previous_eval) {
    try {
      const prev = (await get(evalPath(ev.previous_eval), { signal })).body.evaluation;
      if (prev.placement_failures?.length) why = { failures: prev.placement_failures, from: prev.id };
    } catch (e) {
      // Garbage collected: the view still shows the evaluation itself.
      if (e.status !== 404) throw e;
    }
  }
  return { ev, ...why };
}

function Entries({ id, map, show }) {
  const entries = Object.entries(map || {});
  if (!entries.length) return '—';
  return html`<span id=${id}>${entries.map(([k, v], i) => html`${i ? ', ' : ''}${k}: ${show(v)}`)}</span>`;
}

export function EvalView({ id }) {
  const { data, error } = useLive((signal) => load(id, signal), [id], { topics: ['TOPIC_EVALUATION'], match: (e) => e.key === id });
  if (!data) return html`<h1>Evaluation ${id}</h1><${ErrorBox} error=${error} />${error ? null : html`<p class="muted">Loading…</p>`}`;
  const { ev, failures, from } = data;
  const blocked = ev.status === 'EVAL_STATUS_BLOCKED';
  return html`
    <h1>Evaluation ${ev.id.slice(0, 8)}</h1>
    <${ErrorBox} error=${error} />
    <dl class="facts" id="eval-facts">
      <dt>ID</dt><dd>${ev.id}</dd>
      <dt>Status</dt><dd id="eval-status"><${Status} value=${evalStatus(ev)} />${ev.status_description ? ` ${ev.status_description}` : ''}</dd>
      <dt>Triggered by</dt><dd id="eval-trigger">${evalTrigger(ev)}</dd>
      <dt>Job</dt><dd><${JobLink} id=${ev.job_id} /> (${enumName(ev.type, 'JOB_TYPE_')}, priority ${ev.priority || 0})</dd>
      ${ev.node_id ? html`<dt>Node</dt><dd><${NodeLink} id=${ev.node_id} /></dd>` : null}
      <dt>Previous</dt><dd data-field="previous"><${EvalLink} id=${ev.previous_eval} /></dd>
      <dt>Next</dt><dd data-field="next"><${EvalLink} id=${ev.next_eval} /></dd>
      <dt>Blocked</dt><dd data-field="blocked"><${EvalLink} id=${ev.blocked_eval} /></dd>
      ${ev.wait_until ? html`<dt>Wait until</dt><dd><${Time} ns=${ev.wait_until} /></dd>` : null}
      ${ev.wait_index ? html`<dt>Wait index</dt><dd>${ev.wait_index}</dd>` : null}
      <dt>Queued</dt><dd><${Entries} id="eval-queued" map=${ev.queued_allocations} show=${(n) => n} /></dd>
      ${blocked ? html`
        <dt>Node classes</dt><dd><${Entries} id="eval-classes" map=${ev.class_eligibility} show=${(ok) => (ok ? 'feasible' : 'infeasible')} /></dd>
        <dt>Unblocked by</dt><dd>${ev.escaped_computed_class ? 'any capacity change (constraints beyond node classes)' : 'capacity on a feasible node class'}</dd>` : null}
      <dt>Snapshot index</dt><dd>${ev.snapshot_index || 0}</dd>
      <dt>Created</dt><dd><${Time} ns=${ev.create_time} /></dd>
      <dt>Modified</dt><dd><${Time} ns=${ev.modify_time} /></dd>
    </dl>
    <h2>Placement failures</h2>
    ${from !== ev.id ? html`<p class="muted" id="eval-failures-from">As counted by <${EvalLink} id=${from} />, which left this evaluation blocked.</p>` : null}
    ${failures.length ? html`<${PlacementFailures} failures=${failures} />` : html`<p class="muted">None recorded.</p>`}`;
}
