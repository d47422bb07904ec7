// The topology's model: one entry per node in a Map keyed by node id, filled
// from GET /v1/nodes/usage and kept current by applying each node event's
// payload to its entry, so that a change costs one entry, not a reload of
// 5,000. Every entry carries the node's modify_index: of two descriptions
// of a node (an event, a usage page read a moment earlier) the newer wins,
// whichever arrives last.
import { enumName } from '../util.mjs';

const ineligible = 'SCHEDULING_ELIGIBILITY_INELIGIBLE';

/** protojson writes 64-bit integers as strings, and leaves out zeros. */
const num = (v) => Number(v || 0);

function describe(e, src) {
  e.name = src.name || '';
  e.datacenter = src.datacenter || '';
  e.nodeClass = src.node_class || '';
  e.status = enumName(src.status, 'NODE_STATUS_') || 'unknown';
  e.eligible = src.scheduling_eligibility !== ineligible;
  e.index = num(src.modify_index);
}

/** An entry from a NodeUsage of GET /v1/nodes/usage. */
export function fromUsage(u) {
  const e = { id: u.id };
  describe(e, u);
  e.draining = !!u.draining;
  e.cpuCap = num(u.capacity?.cpu_mhz);
  e.memCap = num(u.capacity?.memory_mb);
  e.cpuUsed = num(u.used?.cpu_mhz);
  e.memUsed = num(u.used?.memory_mb);
  return e;
}

/** Where a node sits in the drawing: a change of it moves cells. */
const placeOf = (e) => `${e.datacenter}\u0000${e.nodeClass}\u0000${e.name}`;

export class Topology {
  constructor() {
    /** @type {Map<string, object>} node id -> entry */
    this.nodes = new Map();
    // Set when a node comes, goes or changes group or name: the layout
    // must be made again. Other changes only need a redraw.
    this.moved = true;
    // Counts the node events applied; an entry keeps the count of the
    // last one that touched it.
    this.seq = 0;
    // Nodes deleted by an event, by its count, so that a read that
    // started before the deletion does not bring them back.
    this.gone = new Map();
  }

  /** Merges a whole read of GET /v1/nodes/usage, started when this.seq
   * was since. What it says of a node is taken unless an event already
   * told something newer; usage figures come only from here, so they are
   * always taken. A node it does not list is dropped unless an event
   * brought it after the read started (it registered meanwhile). */
  merge(usages, since) {
    const seen = new Set();
    for (const u of usages) {
      if (this.gone.get(u.id) > since) continue;
      seen.add(u.id);
      const fresh = fromUsage(u);
      const old = this.nodes.get(u.id);
      if (!old) {
        this.nodes.set(u.id, fresh);
        this.moved = true;
      } else if (old.index <= fresh.index) {
        // In place: the layout holds the entries themselves.
        if (placeOf(old) !== placeOf(fresh)) this.moved = true;
        Object.assign(old, fresh);
      } else {
        Object.assign(old, { cpuUsed: fresh.cpuUsed, memUsed: fresh.memUsed });
      }
    }
    for (const [id, e] of this.nodes) {
      if (!seen.has(id) && !(e.seq > since)) {
        this.nodes.delete(id);
        this.moved = true;
      }
    }
    for (const [id, seq] of this.gone) if (seq <= since) this.gone.delete(id);
  }

  /** Applies one TOPIC_NODE event; returns whether it changed anything.
   * A node event carries the whole node but not what its allocations
   * hold: the entry keeps its usage figures. */
  applyNode(ev) {
    const node = ev.node;
    const old = this.nodes.get(ev.key);
    if (ev.type === 'GarbageCollected') {
      this.gone.set(ev.key, ++this.seq);
      if (!old) return false;
      this.nodes.delete(ev.key);
      this.moved = true;
      return true;
    }
    if (old && old.index > num(node.modify_index)) return false;
    const e = old || { id: ev.key, cpuUsed: 0, memUsed: 0 };
    const before = old ? placeOf(old) : '';
    describe(e, node);
    e.seq = ++this.seq;
    e.draining = !!node.drain_strategy;
    e.cpuCap = num(node.resources?.cpu_mhz) - num(node.reserved?.cpu_mhz);
    e.memCap = num(node.resources?.memory_mb) - num(node.reserved?.memory_mb);
    if (!old) this.nodes.set(ev.key, e);
    if (before !== placeOf(e)) this.moved = true;
    return true;
  }

  /** Applies a batch of the event stream (events.mjs): node events by
   * key. Returns the node events that changed an entry, and whether usage
   * must be read again: after an allocation event (see views/topology.mjs
   * for why), or an event without payload, which the stream delivers after
   * a reconnect that may have missed some. */
  applyEvents(events) {
    const changed = [];
    let reread = false;
    for (const ev of events) {
      if (ev.topic === 'TOPIC_ALLOCATION' || (ev.topic === 'TOPIC_NODE' && !ev.node)) reread = true;
      else if (ev.topic === 'TOPIC_NODE' && this.applyNode(ev)) changed.push(ev);
    }
    return { changed, reread };
  }

  /** Nodes per status, and how many are ineligible and draining. */
  counts() {
    const c = { total: this.nodes.size, ready: 0, initializing: 0, down: 0, disconnected: 0, ineligible: 0, draining: 0,
      cpuUsed: 0, cpuCap: 0, memUsed: 0, memCap: 0 };
    for (const e of this.nodes.values()) {
      c[e.status] = (c[e.status] || 0) + 1;
      if (!e.eligible) c.ineligible++;
      if (e.draining) c.draining++;
      c.cpuUsed += e.cpuUsed;
      c.cpuCap += e.cpuCap;
      c.memUsed += e.memUsed;
      c.memCap += e.memCap;
    }
    return c;
  }
}
