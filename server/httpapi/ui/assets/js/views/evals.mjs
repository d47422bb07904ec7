// Evaluations view: every evaluation, newest first, with a filter box over
// job, status and trigger. Loads again when an evaluation changes.
import { html } from '../html.mjs';
import { useState } from '../../vendor/preact-hooks.mjs';
import { getAll } from '../api.mjs';
import { useLive } from '../live.mjs';
import { EvalLink, JobLink } from '../links.mjs';
import { Time } from '../time.mjs';
import { ErrorBox, Status, enumName } from '../util.mjs';

/** Newest first. The API lists in id order (random UUIDs), so the order
 * is made here, by raft index of creation. */
export function newestFirst(evals) {
  return [...evals].sort((a, b) => Number(b.create_index || 0) - Number(a.create_index || 0));
}

export const evalStatus = (e) => enumName(e.status, 'EVAL_STATUS_');
export const evalTrigger = (e) => enumName(e.triggered_by, 'EVAL_TRIGGER_');

const load = async (signal) => newestFirst(await getAll('/v1/evaluations', 'evaluations', { signal }));

function matches(e, q) {
  return !q || [e.job_id || '', evalStatus(e), evalTrigger(e)].some((v) => v.includes(q));
}

/** One row per evaluation; shared with the job view's short list. */
export function EvalRows({ evals }) {
  return evals.map((e) => html`
    <tr key=${e.id} data-eval=${e.id}>
      <td><${EvalLink} id=${e.id} /></td>
      <td><${JobLink} id=${e.job_id} /></td>
      <td><${Status} value=${evalStatus(e)} /></td>
      <td>${evalTrigger(e)}</td>
      <td>${(e.placement_failures || []).length ? 'yes' : ''}</td>
      <td><${Time} ns=${e.create_time} /></td>
    </tr>`);
}

export const EvalHead = () => html`<thead><tr><th>ID</th><th>Job</th><th>Status</th><th>Triggered by</th><th>Placement failures</th><th>Created</th></tr></thead>`;

export function EvalsView() {
  const { data, error } = useLive(load, [], { topics: ['TOPIC_EVALUATION'] });
  const [filter, setFilter] = useState('');
  const evals = (data || []).filter((e) => matches(e, filter));
  return html`
    <h1>Evaluations</h1>
    <${ErrorBox} error=${error} />
    <p><input type="search" placeholder="Filter by job, status or trigger" aria-label="Filter evaluations" value=${filter}
      onInput=${(e) => setFilter(e.currentTarget.value)} /></p>
    ${data === null ? (error ? null : html`<p class="muted">Loading…</p>`) : html`
    <table id="evals">
      <${EvalHead} />
      <tbody><${EvalRows} evals=${evals} /></tbody>
    </table>
    <p class="muted">${evals.length} of ${data.length} evaluations</p>`}`;
}
