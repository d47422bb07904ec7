// Links to the views of objects the API names by id. Ids are UUIDs: the
// link shows the first 8 characters, the whole id on hover.
import { html } from './html.mjs';

function link(base, id, short = true) {
  if (!id) return '—';
  return html`<a href=${`/ui/${base}/${encodeURIComponent(id)}`} title=${id}>${short ? id.slice(0, 8) : id}</a>`;
}

export const AllocLink = ({ id }) => link('allocations', id);
export const EvalLink = ({ id }) => link('evaluations', id);
export const NodeLink = ({ id }) => link('nodes', id);
// Job ids are names the operator chose: shown whole.
export const JobLink = ({ id }) => link('jobs', id, false);
