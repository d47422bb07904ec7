// Allocation view: one allocation's facts and node, its status history and
// its reschedule trail. Loads again on events about this allocation only.
import { html } from '../html.mjs';
import { get } from '../api.mjs';
import { useLive } from '../live.mjs';
import { AllocLink, EvalLink, JobLink, NodeLink } from '../links.mjs';
import { Time } from '../time.mjs';
import { ErrorBox, Status, enumName } from '../util.mjs';

const clientStatus = (s) => enumName(s, 'ALLOC_CLIENT_STATUS_');

/** The node's name and status, live from its own events. */
function NodeFact({ id }) {
  const { data, error } = useLive(async (signal) => (await get(`/v1/node/${encodeURIComponent(id)}`, { signal })).body.node,
    [id], { topics: ['TOPIC_NODE'], match: (e) => e.key === id });
  return html`<span id="alloc-node"><${NodeLink} id=${id} />
    ${data ? html` ${data.name} <${Status} value=${enumName(data.status, 'NODE_STATUS_')} />` : null}
    <${ErrorBox} error=${error} /></span>`;
}

/** What a server-recorded status change meant: the servers record only
 * disconnects, losses and reconnects (docs/architecture.md). */
function meaning(s) {
  if (s === 'unknown') return 'its node disconnected; it may still run there';
  if (s === 'lost') return 'lost with its node';
  return 'its node reconnected';
}

/** Creation, the servers' entries (alloc_states), and the status now.
 * Agents' reports (pending, running, complete) replace each other: only
 * the latest is kept, so it is the last row. */
function History({ a }) {
  const states = (a.alloc_states || []).filter((s) => s.field === 'ALLOC_STATE_FIELD_CLIENT_STATUS');
  return html`
    <table id="alloc-history">
      <thead><tr><th>Time</th><th>Status</th><th>Description</th></tr></thead>
      <tbody>
        <tr data-state="created"><td><${Time} ns=${a.create_time} /></td><td>created</td><td></td></tr>
        ${states.map((s) => html`
          <tr data-state=${clientStatus(s.client_status)}>
            <td><${Time} ns=${s.time} /></td>
            <td><${Status} value=${clientStatus(s.client_status)} /></td>
            <td>${meaning(clientStatus(s.client_status))}</td>
          </tr>`)}
        <tr data-state="now">
          <td><${Time} ns=${a.modify_time} /></td>
          <td><${Status} value=${clientStatus(a.client_status)} /> (now)</td>
          <td>${a.client_description || ''}</td>
        </tr>
      </tbody>
    </table>`;
}

/** The allocations this one replaces and was replaced by, and the
 * reschedules that led to it. */
function Reschedules({ a }) {
  const events = a.reschedule_tracker?.events || [];
  const t = a.desired_transition || {};
  const asked = ['migrate', 'reschedule', 'force_reschedule'].filter((k) => t[k]).map((k) => k.replace('_', ' '));
  return html`
    <dl class="facts" id="alloc-trail">
      <dt>Replaces</dt><dd data-field="previous"><${AllocLink} id=${a.previous_allocation} /></dd>
      <dt>Replaced by</dt><dd data-field="next"><${AllocLink} id=${a.next_allocation} /></dd>
      <dt>Follow-up evaluation</dt><dd><${EvalLink} id=${a.followup_eval_id} /></dd>
      <dt>Transition asked</dt><dd>${asked.join(', ') || '—'}</dd>
    </dl>
    ${events.length ? html`
    <table id="alloc-reschedules">
      <thead><tr><th>Time</th><th>Previous allocation</th><th>Previous node</th><th>Delay</th></tr></thead>
      <tbody>
        ${events.map((e) => html`
          <tr key=${e.prev_alloc_id}>
            <td><${Time} ns=${e.time} /></td>
            <td><${AllocLink} id=${e.prev_alloc_id} /></td>
            <td><${NodeLink} id=${e.prev_node_id} /></td>
            <td>${e.delay || '—'}</td>
          </tr>`)}
      </tbody>
    </table>` : html`<p class="muted">Not a reschedule of a failed allocation.</p>`}`;
}

function health(ds) {
  if (ds.healthy === undefined) return 'undecided';
  return ds.healthy ? 'healthy' : 'unhealthy';
}

function Deployment({ a }) {
  if (!a.deployment_id) return null;
  const ds = a.deployment_status || {};
  return html`
    <dt>Deployment</dt>
    <dd title=${a.deployment_id}>${a.deployment_id.slice(0, 8)}: <${Status} value=${health(ds)} />${ds.canary ? ' (canary)' : ''}</dd>`;
}

export function AllocView({ id }) {
  const { data: a, error } = useLive(async (signal) => (await get(`/v1/allocation/${encodeURIComponent(id)}`, { signal })).body.allocation,
    [id], { topics: ['TOPIC_ALLOCATION'], match: (e) => e.key === id });
  if (!a) return html`<h1>Allocation ${id}</h1><${ErrorBox} error=${error} />${error ? null : html`<p class="muted">Loading…</p>`}`;
  const r = a.resources || {};
  return html`
    <h1>Allocation ${a.name}</h1>
    <${ErrorBox} error=${error} />
    <dl class="facts" id="alloc-facts">
      <dt>ID</dt><dd>${a.id}</dd>
      <dt>Job</dt><dd><${JobLink} id=${a.job_id} /> version ${a.job_version || 0}</dd>
      <dt>Group</dt><dd>${a.task_group}</dd>
      <dt>Node</dt><dd><${NodeFact} id=${a.node_id} /></dd>
      <dt>Desired</dt><dd id="alloc-desired">${enumName(a.desired_status, 'ALLOC_DESIRED_STATUS_')}${a.desired_description ? `: ${a.desired_description}` : ''}</dd>
      <dt>Client</dt><dd id="alloc-client"><${Status} value=${clientStatus(a.client_status)} />${a.client_description ? ` ${a.client_description}` : ''}</dd>
      <${Deployment} a=${a} />
      <dt>Resources</dt><dd>${r.cpu_mhz || 0} MHz, ${r.memory_mb || 0} MB${r.ip ? `, ${r.ip}` : ''}${(r.ports || []).map((p) => ` ${p.label}:${p.value}`).join('')}</dd>
      <dt>Evaluation</dt><dd><${EvalLink} id=${a.eval_id} /></dd>
      <dt>Created</dt><dd><${Time} ns=${a.create_time} /></dd>
      <dt>Modified</dt><dd><${Time} ns=${a.modify_time} /></dd>
    </dl>
    <h2>Status history</h2>
    <${History} a=${a} />
    <h2>Reschedules</h2>
    <${Reschedules} a=${a} />`;
}
