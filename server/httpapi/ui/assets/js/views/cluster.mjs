// Cluster view: the servers, who leads, raft indexes, last contact,
// autopilot health and versions. Raft and autopilot are not in the event
// stream, so this view polls.
import { html } from '../html.mjs';
import { get } from '../api.mjs';
import { useLive } from '../live.mjs';
import { ErrorBox, Status, enumName } from '../util.mjs';

async function load(signal) {
  const [health, raft] = await Promise.all([
    get('/v1/operator/autopilot/health', { signal }),
    get('/v1/operator/raft/configuration', { signal }),
  ]);
  return { health: health.body, raft: raft.body };
}

export function ClusterView() {
  const { data, error } = useLive(load, [], { every: 3000 });
  if (!data) return html`<h1>Cluster</h1><${ErrorBox} error=${error} />${error ? null : html`<p class="muted">Loading…</p>`}`;
  const { health, raft } = data;
  const servers = health.servers || [];
  const peers = new Map((raft.peers || []).map((p) => [p.id, p]));
  const leader = servers.find((s) => s.leader);
  const index = Math.max(0, ...servers.map((s) => Number(s.last_index || 0)));
  return html`
    <h1>Cluster</h1>
    <${ErrorBox} error=${error} />
    <dl class="facts" id="cluster-facts">
      <dt>Cluster</dt><dd>${health.cluster_id || '—'}</dd>
      <dt>Leader</dt><dd id="cluster-leader">${leader ? leader.id : 'none'}</dd>
      <dt>Autopilot</dt><dd><${Status} value=${health.healthy ? 'healthy' : 'unhealthy'} /></dd>
      <dt>Failure tolerance</dt><dd>${health.failure_tolerance || 0}</dd>
      <dt>Raft index</dt><dd>${index}</dd>
      <dt>Configuration index</dt><dd>${raft.index || 0}</dd>
    </dl>
    <h2>Servers</h2>
    <table id="servers">
      <thead><tr><th>ID</th><th>Raft address</th><th>RPC address</th><th>Version</th><th>State</th>
        <th>Voter</th><th>Healthy</th><th>Last index</th><th>Last term</th><th>Last contact</th><th>Error</th></tr></thead>
      <tbody>
        ${servers.map((s) => html`
          <tr key=${s.id} data-server=${s.id}>
            <td>${s.id}${s.leader ? ' ★' : ''}</td>
            <td>${s.raft_addr}</td>
            <td>${s.rpc_addr || peers.get(s.id)?.rpc_addr || ''}</td>
            <td>${s.version}</td>
            <td><${Status} value=${enumName(s.raft_state, 'RAFT_STATE_')} /></td>
            <td>${s.voter ? 'yes' : 'no'}</td>
            <td><${Status} value=${s.healthy ? 'healthy' : 'unhealthy'} /></td>
            <td>${s.last_index || 0}</td>
            <td>${s.last_term || 0}</td>
            <td>${s.leader ? '—' : s.last_contact || '0s'}</td>
            <td>${s.error || ''}</td>
          </tr>`)}
      </tbody>
    </table>`;
}
