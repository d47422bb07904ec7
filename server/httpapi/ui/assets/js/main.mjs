// The app: header, token box, and the view the address names. Addresses
// are real paths under /ui/ (the server answers index.html for them), so
// views can be reloaded, bookmarked and shared.
import { html, render } from './html.mjs';
import { useEffect, useState } from '../vendor/preact-hooks.mjs';
import { onStreamState } from './events.mjs';
import { TokenBox } from './token.mjs';
import { AllocView } from './views/alloc.mjs';
import { ClusterView } from './views/cluster.mjs';
import { EvalView } from './views/eval.mjs';
import { EvalsView } from './views/evals.mjs';
import { JobsView } from './views/jobs.mjs';
import { JobView } from './views/job.mjs';
import { NodeView } from './views/node.mjs';
import { NodesView } from './views/nodes.mjs';
import { TopologyView } from './views/topology.mjs';

/** The view for a path under /ui/. */
function route(pathname) {
  const parts = pathname.replace(/^\/ui\/?/, '').split('/').filter(Boolean).map(decodeURIComponent);
  if (parts[0] === 'jobs' && parts[1]) return { nav: 'jobs', view: html`<${JobView} id=${parts[1]} />` };
  if (parts[0] === 'jobs') return { nav: 'jobs', view: html`<${JobsView} />` };
  if (parts[0] === 'nodes' && parts[1]) return { nav: 'nodes', view: html`<${NodeView} id=${parts[1]} />` };
  if (parts[0] === 'allocations' && parts[1]) return { nav: 'jobs', view: html`<${AllocView} id=${parts[1]} />` };
  if (parts[0] === 'evaluations' && parts[1]) return { nav: 'evaluations', view: html`<${EvalView} id=${parts[1]} />` };
  if (parts[0] === 'evaluations') return { nav: 'evaluations', view: html`<${EvalsView} />` };
  if (parts[0] === 'nodes') return { nav: 'nodes', view: html`<${NodesView} />` };
  if (parts[0] === 'topology') return { nav: 'topology', view: html`<${TopologyView} />` };
  if (parts.length === 0 || parts[0] === 'cluster') return { nav: 'cluster', view: html`<${ClusterView} />` };
  return { nav: '', view: html`<h1>Not found</h1><p>The UI has no view at ${pathname}.</p>` };
}

const liveLabels = { connecting: 'connecting', live: 'live', down: 'reconnecting', refused: 'polling' };

/** The event stream's state, so an operator knows whether views update;
 * when the token may not read it, why (views poll meanwhile). */
function Live() {
  const [{ state, why }, setState] = useState({ state: 'connecting', why: '' });
  useEffect(() => onStreamState((s, w) => setState({ state: s, why: w })), []);
  return html`<span class=${`live s-${state}`} id="live" title=${why ? `live updates refused: ${why}` : ''}>${liveLabels[state]}</span>`;
}

function App() {
  const [path, setPath] = useState(location.pathname);
  useEffect(() => {
    const pop = () => setPath(location.pathname);
    // Links inside the UI change the view without loading the page.
    const click = (e) => {
      const a = e.target.closest('a');
      if (!a || e.defaultPrevented || e.button !== 0 || e.metaKey || e.ctrlKey || e.shiftKey) return;
      const url = new URL(a.href, location.href);
      if (url.origin !== location.origin || !url.pathname.startsWith('/ui/')) return;
      e.preventDefault();
      history.pushState(null, '', url.pathname);
      setPath(url.pathname);
    };
    window.addEventListener('popstate', pop);
    document.addEventListener('click', click);
    return () => {
      window.removeEventListener('popstate', pop);
      document.removeEventListener('click', click);
    };
  }, []);
  const { nav, view } = route(path);
  const link = (href, name, label) => html`<a href=${href} class=${nav === name ? 'active' : ''}>${label}</a>`;
  return html`
    <header>
      <span class="brand">drover</span>
      <nav>${link('/ui/cluster', 'cluster', 'Cluster')}${link('/ui/nodes', 'nodes', 'Nodes')}${link('/ui/topology', 'topology', 'Topology')}${link('/ui/jobs', 'jobs', 'Jobs')}${link('/ui/evaluations', 'evaluations', 'Evaluations')}</nav>
      <${Live} />
      <${TokenBox} />
    </header>
    <main>${view}</main>`;
}

render(html`<${App} />`, document.getElementById('app'));
