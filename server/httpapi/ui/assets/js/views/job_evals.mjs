// The job view's latest evaluations, live from their events. Its own
// component so that the job view's loads stay as they are.
import { html } from '../html.mjs';
import { getAll } from '../api.mjs';
import { useLive } from '../live.mjs';
import { ErrorBox } from '../util.mjs';
import { EvalHead, EvalRows, newestFirst } from './evals.mjs';

const shown = 5;

export function JobEvals({ id }) {
  const { data, error } = useLive(
    async (signal) => newestFirst(await getAll(`/v1/job/${encodeURIComponent(id)}/evaluations`, 'evaluations', { signal })),
    [id], { topics: ['TOPIC_EVALUATION'], match: (e) => e.evaluation?.job_id === id });
  return html`
    <h2>Evaluations</h2>
    <${ErrorBox} error=${error} />
    ${data ? html`
      <table id="job-evals">
        <${EvalHead} />
        <tbody><${EvalRows} evals=${data.slice(0, shown)} /></tbody>
      </table>
      ${data.length > shown ? html`<p class="muted">${shown} newest of ${data.length}: all on <a href="/ui/evaluations">Evaluations</a>.</p>` : null}` : null}`;
}
