// Node view: one node's facts, its drain and how far it has got, its
// allocations and its events, with the drain and eligibility actions.
// Loads again when this node or one of its allocations changes.
import { html } from '../html.mjs';
import { useState } from '../../vendor/preact-hooks.mjs';
import { get, write } from '../api.mjs';
import { Action } from '../action.mjs';
import { useLive } from '../live.mjs';
import { formatTime } from '../time.mjs';
import { ErrorBox, Status, enumName, toDuration } from '../util.mjs';
import { EligibilityAction } from './nodes.mjs';

const terminalClient = ['ALLOC_CLIENT_STATUS_COMPLETE', 'ALLOC_CLIENT_STATUS_FAILED', 'ALLOC_CLIENT_STATUS_LOST'];

/** Whether an allocation still holds its place on the node. */
function onNode(a) {
  return a.desired_status === 'ALLOC_DESIRED_STATUS_RUN' && !terminalClient.includes(a.client_status);
}

/** How far a drain has got: the allocations stopped since it began
 * against those still on the node. */
export function drainProgress(drain, allocs) {
  const since = BigInt(drain.started_at || 0);
  const left = allocs.filter(onNode).length;
  const moved = allocs.filter((a) => !onNode(a) && BigInt(a.modify_time || 0) >= since).length;
  return { left, moved };
}

/** Starts a drain, asking for an optional deadline first. */
function DrainAction({ node }) {
  const [deadline, setDeadline] = useState('');
  const path = `/v1/node/${encodeURIComponent(node.id)}/drain`;
  if (node.drain_strategy) {
    return html`<${Action} name="drain-stop" label="Stop drain"
      question=${`Stop draining ${node.name} and make it eligible again?`}
      run=${() => write('POST', path, { enable: false, mark_eligible: true })} />`;
  }
  return html`
    <label>Deadline <input type="text" name="deadline" size="6" placeholder="none" aria-label="Drain deadline"
      value=${deadline} onInput=${(e) => setDeadline(e.currentTarget.value.trim())} /></label>
    <${Action} name="drain" label="Drain"
      question=${`Drain ${node.name}${deadline ? ` with a deadline of ${deadline}` : ''}? Its allocations move to other nodes.`}
      run=${() => write('POST', path, deadline ? { enable: true, deadline: toDuration(deadline) } : { enable: true })} />`;
}

function DrainFacts({ node, allocs }) {
  const d = node.drain_strategy;
  if (!d) return null;
  const { left, moved } = drainProgress(d, allocs);
  return html`
    <h2>Drain</h2>
    <dl class="facts" id="drain">
      <dt>Started</dt><dd>${formatTime(d.started_at)}</dd>
      <dt>Deadline</dt><dd>${formatTime(d.deadline) || 'none'}</dd>
      <dt>System jobs</dt><dd>${d.ignore_system_jobs ? 'left on the node' : 'moved'}</dd>
      <dt>Progress</dt>
      <dd><progress max=${moved + left || 1} value=${moved}></progress>
        <span id="drain-left">${left}</span> left, ${moved} moved</dd>
    </dl>`;
}

export function NodeView({ id }) {
  const path = `/v1/node/${encodeURIComponent(id)}`;
  const { data, error } = useLive(async (signal) => (await get(path, { signal })).body, [id], {
    topics: ['TOPIC_NODE', 'TOPIC_ALLOCATION'],
    match: (e) => e.key === id || e.allocation?.node_id === id,
  });
  if (!data) return html`<h1>Node ${id}</h1><${ErrorBox} error=${error} />${error ? null : html`<p class="muted">Loading…</p>`}`;
  const { node } = data;
  const allocs = data.allocs || [];
  const res = node.resources || {};
  return html`
    <h1>Node ${node.name}</h1>
    <${ErrorBox} error=${error} />
    <p class="actions"><${EligibilityAction} node=${node} /> <${DrainAction} node=${node} /></p>
    <dl class="facts">
      <dt>ID</dt><dd>${node.id}</dd>
      <dt>Status</dt><dd id="node-status"><${Status} value=${enumName(node.status, 'NODE_STATUS_')} /> ${node.status_description || ''}</dd>
      <dt>Eligibility</dt><dd id="node-eligibility">${enumName(node.scheduling_eligibility, 'SCHEDULING_ELIGIBILITY_')}</dd>
      <dt>Datacenter</dt><dd>${node.datacenter}</dd>
      <dt>Class</dt><dd>${node.node_class || ''}</dd>
      <dt>Resources</dt><dd>${res.cpu_mhz || 0} MHz, ${res.memory_mb || 0} MB memory, ${res.disk_mb || 0} MB disk</dd>
      <dt>Agent</dt><dd>${node.agent_version || ''}</dd>
    </dl>
    <${DrainFacts} node=${node} allocs=${allocs} />
    <h2>Allocations</h2>
    <table id="node-allocations">
      <thead><tr><th>ID</th><th>Job</th><th>Group</th><th>Desired</th><th>Client</th><th>Modified</th></tr></thead>
      <tbody>
        ${allocs.map((a) => html`
          <tr key=${a.id} data-alloc=${a.id} data-on-node=${onNode(a) ? 'yes' : 'no'}>
            <td title=${a.id}><a href=${`/ui/allocations/${encodeURIComponent(a.id)}`}>${a.id.slice(0, 8)}</a></td>
            <td><a href=${`/ui/jobs/${encodeURIComponent(a.job_id)}`}>${a.job_id}</a></td>
            <td>${a.task_group}</td>
            <td>${enumName(a.desired_status, 'ALLOC_DESIRED_STATUS_')}</td>
            <td><${Status} value=${enumName(a.client_status, 'ALLOC_CLIENT_STATUS_')} /></td>
            <td>${formatTime(a.modify_time)}</td>
          </tr>`)}
      </tbody>
    </table>
    <h2>Events</h2>
    <table id="node-events">
      <thead><tr><th>Time</th><th>Subsystem</th><th>Message</th></tr></thead>
      <tbody>
        ${[...(node.events || [])].reverse().map((ev) => html`
          <tr key=${ev.create_index}><td>${formatTime(ev.time)}</td><td>${ev.subsystem}</td><td>${ev.message}</td></tr>`)}
      </tbody>
    </table>`;
}
