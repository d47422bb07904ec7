// The canvas's pointer: hovering a cell shows its node's name and figures
// in a small element beside the pointer; a click opens the node's view.
// The element is written directly, not through Preact: it follows the
// mouse, and re-rendering the view on every mouse move would be waste.
import { hit } from './layout.mjs';

const pct = (used, cap) => (cap > 0 ? `${Math.round((100 * used) / cap)}%` : '—');

/** The lines describing a node entry (model.mjs). */
export function describeNode(e) {
  const flags = [e.status, e.eligible ? 'eligible' : 'ineligible'];
  if (e.draining) flags.push('draining');
  return [
    e.name || e.id,
    flags.join(' · '),
    `${e.datacenter || '(no datacenter)'} · ${e.nodeClass || '(no class)'}`,
    `CPU ${e.cpuUsed.toLocaleString()} of ${e.cpuCap.toLocaleString()} MHz (${pct(e.cpuUsed, e.cpuCap)})`,
    `Memory ${e.memUsed.toLocaleString()} of ${e.memCap.toLocaleString()} MB (${pct(e.memUsed, e.memCap)})`,
  ];
}

/** Opens a view of the UI as its links do (main.mjs listens to popstate). */
function go(path) {
  history.pushState(null, '', path);
  window.dispatchEvent(new PopStateEvent('popstate'));
}

export class Tooltip {
  /** canvas: the drawing; box: the tooltip element; getLayout and getNode
   * read the view's current layout and node entries. */
  constructor(canvas, box, getLayout, getNode) {
    this.canvas = canvas;
    this.box = box;
    this.getLayout = getLayout;
    this.getNode = getNode;
    this.id = '';
    this.at = { x: 0, y: 0 };
    box.hidden = true;
    this.onMove = (e) => this.show(e.offsetX, e.offsetY);
    this.onLeave = () => this.hide();
    this.onClick = (e) => {
      const lay = this.getLayout();
      const node = lay && hit(lay, e.offsetX, e.offsetY);
      if (node) go(`/ui/nodes/${encodeURIComponent(node.id)}`);
    };
    canvas.addEventListener('mousemove', this.onMove);
    canvas.addEventListener('mouseleave', this.onLeave);
    canvas.addEventListener('click', this.onClick);
  }

  show(x, y) {
    const lay = this.getLayout();
    const node = lay && hit(lay, x, y);
    if (!node) {
      this.hide();
      return;
    }
    this.id = node.id;
    this.at = { x, y };
    this.canvas.style.cursor = 'pointer';
    this.box.replaceChildren(...describeNode(node).map((line, i) => {
      const div = document.createElement('div');
      if (i === 0) div.className = 'name';
      div.textContent = line;
      return div;
    }));
    this.box.dataset.node = node.id;
    this.box.hidden = false;
    // Beside the pointer, and to its left near the right edge.
    const left = x + 14 + this.box.offsetWidth > this.canvas.clientWidth ? x - 14 - this.box.offsetWidth : x + 14;
    this.box.style.left = `${Math.max(0, left)}px`;
    this.box.style.top = `${y + 14}px`;
  }

  hide() {
    this.id = '';
    this.canvas.style.cursor = '';
    this.box.hidden = true;
  }

  /** After a redraw: the hovered node may have changed or gone. */
  refresh() {
    if (!this.id) return;
    if (!this.getNode(this.id)) this.hide();
    else this.show(this.at.x, this.at.y);
  }

  stop() {
    this.canvas.removeEventListener('mousemove', this.onMove);
    this.canvas.removeEventListener('mouseleave', this.onLeave);
    this.canvas.removeEventListener('click', this.onClick);
  }
}
