// Nodes view: every node with its datacenter, class, status, eligibility
// and drain; a search box filters by id, name, datacenter or class, a
// select by status. Each row links to the node's view (node.mjs). Loads
// again when a node changes.
import { html } from '../html.mjs';
import { useState } from '../../vendor/preact-hooks.mjs';
import { getAll, write } from '../api.mjs';
import { Action } from '../action.mjs';
import { useLive } from '../live.mjs';
import { ErrorBox, Status, enumName } from '../util.mjs';

const load = (signal) => getAll('/v1/nodes', 'nodes', { signal });

const eligible = 'SCHEDULING_ELIGIBILITY_ELIGIBLE';
const ineligible = 'SCHEDULING_ELIGIBILITY_INELIGIBLE';

/** The eligibility toggle: the view updates from the node's event. */
export function EligibilityAction({ node }) {
  const to = node.scheduling_eligibility === ineligible ? eligible : ineligible;
  const verb = to === eligible ? 'Mark eligible' : 'Mark ineligible';
  return html`<${Action} name="eligibility" label=${verb}
    question=${`${verb}: ${node.name}?`}
    run=${() => write('POST', `/v1/node/${encodeURIComponent(node.id)}/eligibility`, { eligibility: to })} />`;
}

const statuses = ['ready', 'initializing', 'down', 'disconnected'];

function matches(n, q, status) {
  return (!status || enumName(n.status, 'NODE_STATUS_') === status) &&
    (!q || [n.id, n.name, n.datacenter, n.node_class].some((v) => (v || '').includes(q)));
}

export function NodesView() {
  const { data, error } = useLive(load, [], { topics: ['TOPIC_NODE'] });
  const [filter, setFilter] = useState('');
  const [status, setStatus] = useState('');
  const nodes = (data || []).filter((n) => matches(n, filter, status));
  return html`
    <h1>Nodes</h1>
    <${ErrorBox} error=${error} />
    <p><input type="search" placeholder="Search id, name, datacenter, class" aria-label="Search nodes" value=${filter}
      onInput=${(e) => setFilter(e.currentTarget.value)} />
      <select aria-label="Status" name="status" value=${status} onChange=${(e) => setStatus(e.currentTarget.value)}>
        <option value="">any status</option>
        ${statuses.map((s) => html`<option value=${s}>${s}</option>`)}
      </select></p>
    ${data === null ? (error ? null : html`<p class="muted">Loading…</p>`) : html`
    <table id="nodes">
      <thead><tr><th>ID</th><th>Name</th><th>Datacenter</th><th>Class</th><th>Status</th><th>Eligibility</th><th>Drain</th><th>Version</th><th></th></tr></thead>
      <tbody>
        ${nodes.map((n) => html`
          <tr key=${n.id} data-node=${n.id}>
            <td title=${n.id}><a href=${`/ui/nodes/${encodeURIComponent(n.id)}`}>${n.id.slice(0, 8)}</a></td>
            <td>${n.name}</td>
            <td>${n.datacenter}</td>
            <td>${n.node_class || ''}</td>
            <td data-field="status"><${Status} value=${enumName(n.status, 'NODE_STATUS_')} /></td>
            <td data-field="eligibility">${enumName(n.scheduling_eligibility, 'SCHEDULING_ELIGIBILITY_')}</td>
            <td data-field="drain">${n.drain_strategy ? 'draining' : ''}</td>
            <td>${n.agent_version || ''}</td>
            <td><${EligibilityAction} node=${n} /></td>
          </tr>`)}
      </tbody>
    </table>
    <p class="muted">${nodes.length} of ${data.length} nodes</p>`}`;
}
