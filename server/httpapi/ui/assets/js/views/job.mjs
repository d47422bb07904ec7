// Job view: the job, its groups with allocation counts by client status,
// its latest deployment (deployment.mjs), its allocations and its kept
// versions with their diffs (versions.mjs). Loads again when the job, one
// of its allocations or its deployment changes.
import { html } from '../html.mjs';
import { get, getAll, write } from '../api.mjs';
import { Action } from '../action.mjs';
import { useLive } from '../live.mjs';
import { ErrorBox, Status, enumName } from '../util.mjs';
import { JobDeployment } from './deployment.mjs';
import { JobEvals } from './job_evals.mjs';
import { JobVersions } from './versions.mjs';

const clientStatuses = ['pending', 'running', 'complete', 'failed', 'lost', 'unknown'];

export function JobView({ id }) {
  const path = `/v1/job/${encodeURIComponent(id)}`;
  const { data, error } = useLive(async (signal) => {
    // Allocations and deployments are resources of their own under ACLs:
    // a token may read the job but not them, so each part shows its own
    // refusal.
    const [job, allocs, deployments, versions] = await Promise.all([
      get(path, { signal }),
      part(getAll(`${path}/allocations`, 'allocations', { signal })),
      part(get(`${path}/deployments`, { signal }).then((r) => (r.body.deployments || [])[0] || null)),
      part(get(`${path}/versions`, { signal }).then((r) => r.body.versions || [])),
    ]);
    return { job: job.body.job, allocs, deployments, versions };
  }, [id], {
    topics: ['TOPIC_JOB', 'TOPIC_ALLOCATION', 'TOPIC_DEPLOYMENT'],
    match: (e) => e.key === id || e.allocation?.job_id === id || e.deployment?.job_id === id,
  });
  if (!data) return html`<h1>Job ${id}</h1><${ErrorBox} error=${error} />${error ? null : html`<p class="muted">Loading…</p>`}`;
  const { job, deployments, versions } = data;
  const allocs = data.allocs.value || [];
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
    ${deployments.error ? html`<h2>Deployment</h2><${ErrorBox} error=${deployments.error} />` : html`<${JobDeployment} deployment=${deployments.value} />`}
    <h2>Allocations</h2>
    <${ErrorBox} error=${data.allocs.error} />
    <table id="allocations">
      <thead><tr><th>ID</th><th>Group</th><th>Node</th><th>Version</th><th>Health</th><th>Desired</th><th>Client</th></tr></thead>
      <tbody>
        ${allocs.map((a) => html`
          <tr key=${a.id} data-alloc=${a.id}>
            <td title=${a.id}><a href=${`/ui/allocations/${encodeURIComponent(a.id)}`}>${a.id.slice(0, 8)}</a></td>
            <td>${a.task_group}</td>
            <td title=${a.node_id}><a href=${`/ui/nodes/${encodeURIComponent(a.node_id)}`}>${(a.node_id || '').slice(0, 8)}</a></td>
            <td>${a.job_version || 0}</td>
            <td>${health(a)}</td>
            <td>${enumName(a.desired_status, 'ALLOC_DESIRED_STATUS_')}</td>
            <td><${Status} value=${enumName(a.client_status, 'ALLOC_CLIENT_STATUS_')} /></td>
          </tr>`)}
      </tbody>
    </table>
    ${versions.error ? html`<h2>Versions</h2><${ErrorBox} error=${versions.error} />` : html`<${JobVersions} job=${job} versions=${versions.value} />`}
    <${JobEvals} id=${job.id} />`;
}

/** A part of the view's data: { value } or, when refused, { error }. */
function part(promise) {
  return promise.then((value) => ({ value }), (error) => {
    if (error.name === 'AbortError') throw error;
    return { error };
  });
}

/** An allocation's deployment health as its agent reported it. */
function health(a) {
  const st = a.deployment_status;
  if (!st) return '';
  const h = st.healthy === undefined ? 'pending' : st.healthy ? 'healthy' : 'unhealthy';
  return st.canary ? `${h} (canary)` : h;
}
