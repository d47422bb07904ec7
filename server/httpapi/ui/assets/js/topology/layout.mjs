// Where every node's cell goes on the canvas: one block per datacenter and
// class (sorted), a label line, then the block's cells in rows, sorted by
// name so that a cell stays where it is while its node changes status.
// Made again only when nodes come, go or change group (Topology.moved) or
// the canvas changes width; hit testing is arithmetic on the same grid.

/** Cell size for n nodes: big cells for a small cluster, small enough for
 * 5,000 to fit a laptop screen or two (10 px: about 120 a row at 1,280). */
function pitchFor(n) {
  if (n <= 400) return 20;
  if (n <= 1500) return 14;
  return 10;
}

const label = 22; // a block's label line, in CSS pixels
const blockGap = 14; // between blocks

const byName = new Intl.Collator(undefined, { numeric: true }).compare;

/** Lays out the nodes (Topology.nodes values) on a canvas width CSS pixels
 * wide. */
export function layout(nodes, width) {
  const all = [...nodes];
  const pitch = pitchFor(all.length);
  const cell = { w: pitch - 2, h: Math.round(pitch * 1.6) - 2, px: pitch, py: Math.round(pitch * 1.6) };
  const groups = new Map();
  for (const e of all) {
    const key = `${e.datacenter}\u0000${e.nodeClass}`;
    if (!groups.has(key)) groups.set(key, { datacenter: e.datacenter, nodeClass: e.nodeClass, cells: [] });
    groups.get(key).cells.push(e);
  }
  const sorted = [...groups.values()].sort((a, b) => byName(a.datacenter, b.datacenter) || byName(a.nodeClass, b.nodeClass));
  const cols = Math.max(1, Math.floor(width / cell.px));
  let y = 0;
  for (const g of sorted) {
    g.cells.sort((a, b) => byName(a.name, b.name) || (a.id < b.id ? -1 : 1));
    g.y = y;
    g.cols = cols;
    g.rows = Math.ceil(g.cells.length / cols);
    g.cellsY = y + label;
    y = g.cellsY + g.rows * cell.py + blockGap;
  }
  return { groups: sorted, cell, width, height: Math.max(y, 40) };
}

/** The node entry under a point (CSS pixels on the canvas), or null. */
export function hit(lay, x, y) {
  const { cell } = lay;
  for (const g of lay.groups) {
    if (y < g.cellsY || y >= g.cellsY + g.rows * cell.py) continue;
    const col = Math.floor(x / cell.px);
    const row = Math.floor((y - g.cellsY) / cell.py);
    if (col < 0 || col >= g.cols || x - col * cell.px > cell.w || y - g.cellsY - row * cell.py > cell.h) return null;
    return g.cells[row * g.cols + col] || null;
  }
  return null;
}

/** The centre of a node's cell (CSS pixels on the canvas), or null. */
export function cellCentre(lay, id) {
  const { cell } = lay;
  for (const g of lay.groups) {
    const i = g.cells.findIndex((e) => e.id === id);
    if (i < 0) continue;
    return { x: (i % g.cols) * cell.px + cell.w / 2, y: g.cellsY + Math.floor(i / g.cols) * cell.py + cell.h / 2 };
  }
  return null;
}
