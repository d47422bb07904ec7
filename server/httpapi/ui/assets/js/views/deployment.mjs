// The job's latest deployment: its status, a progress bar per group
// (allocations healthy of those wanted), its canaries, and the promote and
// fail actions while it runs.
import { html } from '../html.mjs';
import { write } from '../api.mjs';
import { Action } from '../action.mjs';
import { formatTime } from '../time.mjs';
import { Status, enumName } from '../util.mjs';

const active = ['DEPLOYMENT_STATUS_RUNNING', 'DEPLOYMENT_STATUS_PAUSED'];

/** Groups whose canaries wait for a promotion. */
function awaitingPromotion(d) {
  return Object.entries(d.groups || {}).filter(([, g]) => (g.desired_canaries || 0) > 0 && !g.promoted).map(([name]) => name);
}

/** Whether every canary of those groups is placed and healthy, as the
 * servers require for a promotion (before it, a group's healthy count is
 * its canaries'). */
function canariesReady(d, groups) {
  return groups.every((name) => {
    const g = d.groups[name];
    return (g.placed_canaries || []).length >= g.desired_canaries && (g.healthy_allocs || 0) >= g.desired_canaries;
  });
}

function DeploymentActions({ d }) {
  if (!active.includes(d.status)) return null;
  const path = `/v1/deployment/${encodeURIComponent(d.id)}`;
  const waiting = awaitingPromotion(d);
  return html`<p class="actions">
    ${!waiting.length ? null : canariesReady(d, waiting) ? html`<${Action} name="promote" label="Promote"
      question=${`Promote the canaries of ${waiting.join(', ')} and roll the rest out?`}
      run=${() => write('POST', `${path}/promote`, {})} />` : html`<span class="muted" id="canaries-waiting">Canaries of ${waiting.join(', ')} not yet healthy</span>`}
    <${Action} name="fail" label="Fail deployment"
      question=${'Fail this deployment? With auto_revert the job goes back to its last stable version.'}
      run=${() => write('POST', `${path}/fail`, {})} /></p>`;
}

function GroupRow({ name, g }) {
  const total = g.desired_total || 0;
  const healthy = g.healthy_allocs || 0;
  return html`
    <tr data-group=${name}>
      <td>${name}</td>
      <td><progress max=${total || 1} value=${healthy}></progress>
        <span data-field="healthy">${healthy}</span> / ${total} healthy</td>
      <td data-field="placed">${g.placed_allocs || 0}</td>
      <td data-field="unhealthy">${g.unhealthy_allocs || 0}</td>
      <td>${g.desired_canaries ? `${(g.placed_canaries || []).length} / ${g.desired_canaries}${g.promoted ? ', promoted' : ''}` : ''}</td>
      <td>${formatTime(g.require_progress_by)}</td>
    </tr>`;
}

export function JobDeployment({ deployment: d }) {
  if (!d) return html`<h2>Deployment</h2><p class="muted">None.</p>`;
  return html`
    <h2>Deployment</h2>
    <dl class="facts" id="deployment" data-deployment=${d.id} data-version=${d.job_version || 0}>
      <dt>ID</dt><dd>${d.id}</dd>
      <dt>Version</dt><dd>${d.job_version || 0}</dd>
      <dt>Status</dt><dd id="deployment-status"><${Status} value=${enumName(d.status, 'DEPLOYMENT_STATUS_')} /> ${d.status_description || ''}</dd>
    </dl>
    <${DeploymentActions} d=${d} />
    <table id="deployment-groups">
      <thead><tr><th>Group</th><th>Progress</th><th>Placed</th><th>Unhealthy</th><th>Canaries</th><th>Progress by</th></tr></thead>
      <tbody>${Object.entries(d.groups || {}).sort(([a], [b]) => a.localeCompare(b)).map(([name, g]) => html`<${GroupRow} key=${name} name=${name} g=${g} />`)}</tbody>
    </table>`;
}
