// Topology view: every node as a cell of two bars, CPU and memory in use,
// grouped by datacenter then class and coloured by status, drawn on one
// <canvas> so that 5,000 nodes cost one element and a few fills rather than
// 5,000 components (docs/ui.md, Topology). Preact renders only the text
// around it: counts, totals, legend.
import { html } from '../html.mjs';
import { useEffect, useRef, useState } from '../../vendor/preact-hooks.mjs';
import { getAll } from '../api.mjs';
import { coalesced } from '../coalesce.mjs';
import { onEvents } from '../events.mjs';
import { ErrorBox } from '../util.mjs';
import { Topology } from '../topology/model.mjs';
import { cellCentre, layout } from '../topology/layout.mjs';
import { palette, paint } from '../topology/paint.mjs';
import { Tooltip } from '../topology/tooltip.mjs';
import { Counts, Legend } from '../topology/legend.mjs';

// Allocation events say what one allocation became, not what it was when
// the usage was read, so they cannot be added to or taken from a node's
// figures: usage is read again instead, coalesced (one read in flight plus
// one) and at most once a second, which bounds what a busy cluster's
// allocation churn costs the servers per open tab. Node events are applied
// by key at once.
const usageGap = 1000;

// Recent update timings kept for the browser test (window.droverTopology).
const keptUpdates = 200;

export function TopologyView() {
  const wrap = useRef(null);
  const canvas = useRef(null);
  const tipBox = useRef(null);
  const [counts, setCounts] = useState(null);
  const [error, setError] = useState(null);
  useEffect(() => {
    const mounted = performance.now();
    const topo = new Topology();
    // For the browser test and the curious: timings in ms from
    // performance.now(). firstRenderMs runs from the view's mount (so it
    // includes reading every page of usage) to the end of the first draw;
    // loadMs to the moment the data arrived; an update from an event's
    // arrival to the end of the draw that shows it.
    const stats = { firstRenderMs: null, loadMs: null, drawMs: null, lastUpdateMs: null, updates: [], nodes: 0, groups: [] };
    window.droverTopology = stats;
    // Where a node's cell is in the window (client coordinates), for the
    // test's mouse.
    stats.cellPoint = (id) => {
      const p = lay && cellCentre(lay, id);
      if (!p) return null;
      const r = el.getBoundingClientRect();
      return { x: r.left + p.x, y: r.top + p.y };
    };
    const el = canvas.current;
    const ctx = el.getContext('2d');
    const colors = palette(document.documentElement);
    const ctl = new AbortController();
    let lay = null;
    let dpr = 0;
    let frame = 0;
    let loaded = false;
    let shown = '';
    let arrivals = [];
    const tip = new Tooltip(el, tipBox.current, () => lay, (id) => topo.nodes.get(id));

    const draw = () => {
      frame = 0;
      if (!loaded) return;
      const t0 = performance.now();
      const width = wrap.current.clientWidth;
      if (topo.moved || !lay || lay.width !== width || dpr !== window.devicePixelRatio) {
        lay = layout(topo.nodes.values(), width);
        topo.moved = false;
        // The backing store in device pixels, drawn in CSS pixels: sharp
        // on high-density screens.
        dpr = window.devicePixelRatio || 1;
        el.width = Math.round(lay.width * dpr);
        el.height = Math.round(lay.height * dpr);
        el.style.width = `${lay.width}px`;
        el.style.height = `${lay.height}px`;
        ctx.setTransform(dpr, 0, 0, dpr, 0, 0);
        stats.groups = lay.groups.map((g) => ({ datacenter: g.datacenter, nodeClass: g.nodeClass, nodes: g.cells.length, first: g.cells[0]?.id }));
      }
      paint(ctx, lay, colors);
      const end = performance.now();
      stats.drawMs = end - t0;
      stats.nodes = topo.nodes.size;
      if (stats.firstRenderMs === null) stats.firstRenderMs = end - mounted;
      for (const a of arrivals) {
        stats.lastUpdateMs = end - a.at;
        stats.updates.push({ key: a.key, type: a.type, ms: stats.lastUpdateMs });
      }
      stats.updates.splice(0, stats.updates.length - keptUpdates);
      arrivals = [];
      const c = topo.counts();
      const key = JSON.stringify(c);
      if (key !== shown) {
        shown = key;
        setCounts(c);
      }
      tip.refresh();
    };
    // At most one draw a frame, however many events come in it.
    const redraw = () => {
      if (!frame) frame = requestAnimationFrame(draw);
    };

    const readUsage = coalesced(async () => {
      const since = topo.seq;
      const usages = await getAll('/v1/nodes/usage', 'nodes', { signal: ctl.signal });
      topo.merge(usages, since);
      if (!loaded) stats.loadMs = performance.now() - mounted;
      loaded = true;
      setError(null);
      redraw();
    }, { minGap: usageGap, onError: (e) => e.name !== 'AbortError' && setError(e) });

    const stopEvents = onEvents(['TOPIC_NODE', 'TOPIC_ALLOCATION'], (batch) => {
      const at = performance.now();
      const { changed, reread } = topo.applyEvents(batch.events || []);
      if (loaded) arrivals.push(...changed.map((ev) => ({ key: ev.key, type: ev.type, at })));
      if (reread) readUsage();
      if (changed.length) redraw();
    });
    readUsage();
    const resized = new ResizeObserver(redraw);
    resized.observe(wrap.current);
    window.addEventListener('drover-token', readUsage);
    return () => {
      ctl.abort();
      readUsage.stop();
      stopEvents();
      resized.disconnect();
      tip.stop();
      cancelAnimationFrame(frame);
      window.removeEventListener('drover-token', readUsage);
    };
  }, []);
  return html`
    <h1>Topology</h1>
    <${ErrorBox} error=${error} />
    ${counts ? html`<${Counts} c=${counts} />` : error ? null : html`<p class="muted">Loading…</p>`}
    <${Legend} />
    <div class="topology-frame"><div class="topology" ref=${wrap}>
      <canvas id="topology" width="0" height="0" ref=${canvas} role="img"
        aria-label=${counts ? `${counts.total} nodes by datacenter and class` : 'nodes by datacenter and class'}></canvas>
      <div class="topo-tip" id="topology-tip" role="tooltip" ref=${tipBox}></div>
    </div></div>`;
}
