// Job view: the job, its groups with allocation counts by client status,
// and its allocations. Loads again when the job or its allocations change.
import { html } from '../html.mjs';
import { get, getAll, write } from '../api.mjs';
import { Action } from '../action.mjs';
import { useLive } from '../live.mjs';
import { ErrorBox, Status, enumName } from '../util.mjs';
import { AllocLink } from '../links.mjs';
import { JobEvals } from './job_evals.mjs';

const clientStatuses = ['pending', 'running', 'complete', 'failed', 'lost', 'unknown'];

export function JobView({ id }) {
  const path = `/v1/job/${encodeURIComponent(id)}`;
  const { data, error } = useLive(async (signal) => {
    const [job, allocs] = await Promise.all([
      get(path, { signal }),
      getAll(`${path}/allocations`, 'allocations', { signal }),
    ]);
    return { job: job.body.job, allocs };
  }, [id], { topics: ['TOPIC_JOB', 'TOPIC_ALLOCATION'] });
  if (!data) return html`<h1>Job ${id}</h1><${ErrorBox} error=${error} />${error ? null : html`<p class="muted">Loading…</p>`}`;
  const { job, allocs } = data;
  const counts = new Map();
  for (const a of allocs) {
    const g = counts.get(a.task_group) || {};
    const s = enumName(a.client_status, 'ALLOC_CLIENT_STATUS_');
    g[s] = (g[s] || 0) + 1;
    counts.set(a.task_group, g);
  }
  return html`
    <h1>Job ${job.id}</h1>
    <${ErrorBox} error=${error} />
    ${job.stop ? null : html`<p><${Action} name="stop" label="Stop job"
      question=${`Stop ${job.id} and all its allocations?`} run=${() => write('DELETE', path)} /></p>`}
    <dl class="facts">
      <dt>Status</dt><dd id="job-status"><${Status} value=${job.stop ? 'stopped' : enumName(job.status, 'JOB_STATUS_')} /></dd>
      <dt>Type</dt><dd>${enumName(job.type, 'JOB_TYPE_')}</dd>
      <dt>Version</dt><dd>${job.version || 0}${job.stable ? ' (stable)' : ''}</dd>
      <dt>Priority</dt><dd>${job.priority || 0}</dd>
      <dt>Datacenters</dt><dd>${(job.datacenters || []).join(', ')}</dd>
    </dl>
    <h2>Groups</h2>
    <table id="groups">
      <thead><tr><th>Group</th><th>Count</th>${clientStatuses.map((s) => html`<th>${s}</th>`)}</tr></thead>
      <tbody>
        ${(job.task_groups || []).map((g) => html`
          <tr key=${g.name} data-group=${g.name}>
            <td>${g.name}</td><td>${g.count || 0}</td>
            ${clientStatuses.map((s) => html`<td data-status=${s}>${(counts.get(g.name) || {})[s] || 0}</td>`)}
          </tr>`)}
      </tbody>
    </table>
    <h2>Allocations</h2>
    <table id="allocations">
      <thead><tr><th>ID</th><th>Group</th><th>Node</th><th>Version</th><th>Desired</th><th>Client</th></tr></thead>
      <tbody>
        ${allocs.map((a) => html`
          <tr key=${a.id} data-alloc=${a.id}>
            <td><${AllocLink} id=${a.id} /></td>
            <td>${a.task_group}</td>
            <td title=${a.node_id}>${(a.node_id || '').slice(0, 8)}</td>
            <td>${a.job_version || 0}</td>
            <td>${enumName(a.desired_status, 'ALLOC_DESIRED_STATUS_')}</td>
            <td><${Status} value=${enumName(a.client_status, 'ALLOC_CLIENT_STATUS_')} /></td>
          </tr>`)}
      </tbody>
    </table>
    <${JobEvals} id=${job.id} />`;
}
