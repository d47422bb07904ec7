// The job's kept versions, newest first, each with what changed from the
// one before it, and the revert action on every version but the current.
import { html } from '../html.mjs';
import { write } from '../api.mjs';
import { Action } from '../action.mjs';
import { formatTime } from '../time.mjs';

function Changes({ changes }) {
  if (!changes?.length) return html`<p class="muted">No change recorded (the oldest kept version).</p>`;
  return html`
    <table class="diff">
      <thead><tr><th>Field</th><th>Before</th><th>After</th></tr></thead>
      <tbody>${changes.map((c) => html`
        <tr key=${c.path}><td><code>${c.path}</code></td><td class="old">${c.old || '—'}</td><td class="new">${c.new || '—'}</td></tr>`)}</tbody>
    </table>`;
}

export function JobVersions({ job, versions }) {
  const sorted = [...versions].sort((a, b) => Number(b.job.version || 0) - Number(a.job.version || 0));
  return html`
    <h2>Versions</h2>
    <div id="versions">
      ${sorted.map((v) => {
        const n = Number(v.job.version || 0);
        return html`
          <section class="version" key=${n} data-version=${n}>
            <h3>Version ${n}${v.job.stable ? ' (stable)' : ''}${n === Number(job.version || 0) ? ' — current' : ''}
              <span class="muted"> ${formatTime(v.job.submit_time)}</span></h3>
            ${n === Number(job.version || 0) ? null : html`<${Action} name="revert" label=${`Revert to version ${n}`}
              question=${`Register version ${n} of ${job.id} again, as a new version?`}
              run=${() => write('POST', `/v1/job/${encodeURIComponent(job.id)}/revert`, { version: n, enforce_prior_version: Number(job.version || 0) })} />`}
            <${Changes} changes=${v.changes} />
          </section>`;
      })}
    </div>`;
}
