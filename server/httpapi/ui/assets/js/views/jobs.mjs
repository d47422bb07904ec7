// Jobs view: every job with its type, status, version and groups; a search
// box filters by id. Loads again when a job changes.
import { html } from '../html.mjs';
import { useState } from '../../vendor/preact-hooks.mjs';
import { getAll } from '../api.mjs';
import { useLive } from '../live.mjs';
import { ErrorBox, Status, enumName } from '../util.mjs';

const load = (signal) => getAll('/v1/jobs', 'jobs', { signal });

export function JobsView() {
  const { data, error } = useLive(load, [], { topics: ['TOPIC_JOB'] });
  const [filter, setFilter] = useState('');
  const jobs = (data || []).filter((j) => j.id.includes(filter));
  return html`
    <h1>Jobs</h1>
    <${ErrorBox} error=${error} />
    <p><input type="search" placeholder="Filter by id" aria-label="Filter jobs by id" value=${filter}
      onInput=${(e) => setFilter(e.currentTarget.value)} /></p>
    ${data === null ? (error ? null : html`<p class="muted">Loading…</p>`) : html`
    <table id="jobs">
      <thead><tr><th>ID</th><th>Type</th><th>Status</th><th>Version</th><th>Priority</th><th>Groups</th></tr></thead>
      <tbody>
        ${jobs.map((j) => html`
          <tr key=${j.id} data-job=${j.id}>
            <td><a href=${`/ui/jobs/${encodeURIComponent(j.id)}`}>${j.id}</a></td>
            <td>${enumName(j.type, 'JOB_TYPE_')}</td>
            <td><${Status} value=${j.stop ? 'stopped' : enumName(j.status, 'JOB_STATUS_')} /></td>
            <td>${j.version || 0}</td>
            <td>${j.priority || 0}</td>
            <td>${(j.task_groups || []).map((g) => `${g.name} ×${g.count || 0}`).join(', ')}</td>
          </tr>`)}
      </tbody>
    </table>
    ${jobs.length === 0 ? html`<p class="muted">No jobs${filter ? ' match' : ''}.</p>` : null}`}`;
}
