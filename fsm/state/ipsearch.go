package state

import (
	"cmp"
	"container/heap"
	"encoding/binary"
	"fmt"
	"iter"
	"net/netip"
	"slices"

	droverv1 "github.com/droverhq/drover/proto/drover/v1"
)

// Reads of the ip_blocks and ip_spans tables: is an address held, which
// addresses were never used, which were released and when.

// AllocIPHeld reports whether an allocation that is not client-terminal
// holds the address.
func (s *Snapshot) AllocIPHeld(ip string) bool {
	key, off, ok := ipBlockKey(ip)
	if !ok {
		return false
	}
	return first[*ipBlock](s, tableIPBlocks, indexID, key).has(off)
}

// IPReleasedAt returns the raft index of the entry that last released a
// free address; zero for an address held or never used.
func (s *Snapshot) IPReleasedAt(ip string) uint64 {
	key, off, ok := ipBlockKey(ip)
	if !ok {
		return 0
	}
	b := first[*ipBlock](s, tableIPBlocks, indexID, key)
	if b == nil || b.releasedAt == nil || !bit(&b.freed, off) {
		return 0
	}
	return b.releasedAt[off]
}

// NeverUsedIP returns the first address from from through last (of one
// family) that no allocation has held, as far as the state's history goes:
// a server restored from a snapshot without release history counts free
// addresses as never used. ok is false when there is none. Used-up blocks
// are skipped a span of 256 blocks at a time.
func (s *Snapshot) NeverUsedIP(from, last netip.Addr) (netip.Addr, bool) {
	cur, end := netip.AddrFrom16(from.As16()), netip.AddrFrom16(last.As16())
	for cur.IsValid() && cur.Compare(end) <= 0 {
		blockKey, off := addrBlockKey(cur)
		key, idx := spanKey(blockKey)
		next, ok := first[*ipSpan](s, tableIPSpans, indexID, key).firstNotFull(idx)
		if !ok {
			cur = pastSpan(cur)
			continue
		}
		if next != idx {
			b := cur.As16()
			b[14], b[15] = next, 0
			cur = netip.AddrFrom16(b)
			blockKey, off = addrBlockKey(cur)
		}
		free, ok := first[*ipBlock](s, tableIPBlocks, indexID, blockKey).firstNeverUsed(off)
		if !ok {
			cur = pastBlock(cur)
			continue
		}
		addr := blockAddr(blockKey, free)
		if addr.Compare(end.Unmap()) > 0 {
			break
		}
		if !from.Is4() {
			addr = netip.AddrFrom16(addr.As16())
		}
		return addr, true
	}
	return netip.Addr{}, false
}

// pastBlock and pastSpan return the first address after a's block or span
// (in 16-byte form); invalid past the end of the address space.
func pastBlock(a netip.Addr) netip.Addr {
	b := a.As16()
	b[15] = 0xff
	return netip.AddrFrom16(b).Next()
}

func pastSpan(a netip.Addr) netip.Addr {
	b := a.As16()
	b[14], b[15] = 0xff, 0xff
	return netip.AddrFrom16(b).Next()
}

// ReleasedIPs returns a function that yields, one per call, the addresses
// that were released and are not held since, the longest released first
// (those released by one entry in address order), each with the raft index
// of its release; ok is false once there are no more. It reads blocks
// lazily, so taking the first few costs little whatever the history holds.
func (s *Snapshot) ReleasedIPs() func() (addr netip.Addr, index uint64, ok bool) {
	it, err := s.txn.Get(tableIPBlocks, indexReleased)
	mustRead(err, tableIPBlocks, indexReleased)
	s.watch(it.WatchCh())
	var (
		h       releaseHeap
		pending *ipBlock
		started bool
	)
	pull := func() {
		if obj := it.Next(); obj != nil {
			pending = obj.(*ipBlock)
		} else {
			pending = nil
		}
	}
	return func() (netip.Addr, uint64, bool) {
		if !started {
			started = true
			pull()
		}
		// Blocks come in order of their oldest release; a block joins the
		// merge once its oldest is no newer than the merge's next address.
		for pending != nil && (h.Len() == 0 || pending.oldest <= h[0].at()) {
			heap.Push(&h, newReleaseCursor(pending))
			pull()
		}
		if h.Len() == 0 {
			return netip.Addr{}, 0, false
		}
		c := h[0]
		addr, at := blockAddr(c.block.key, c.offsets[c.next]), c.at()
		c.next++
		if c.next == len(c.offsets) {
			heap.Pop(&h)
		} else {
			heap.Fix(&h, 0)
		}
		return addr, at, true
	}
}

// releaseCursor walks one block's freed addresses in release order.
type releaseCursor struct {
	block   *ipBlock
	offsets []uint8
	next    int
}

func newReleaseCursor(b *ipBlock) *releaseCursor {
	c := &releaseCursor{block: b}
	for off, at := range b.releasedAt {
		if at != 0 && bit(&b.freed, uint8(off)) {
			c.offsets = append(c.offsets, uint8(off))
		}
	}
	slices.SortStableFunc(c.offsets, func(x, y uint8) int { return cmp.Compare(b.releasedAt[x], b.releasedAt[y]) })
	return c
}

func (c *releaseCursor) at() uint64 { return c.block.releasedAt[c.offsets[c.next]] }

// releaseHeap orders cursors by their next address's release index, then
// by address.
type releaseHeap []*releaseCursor

func (h releaseHeap) Len() int { return len(h) }
func (h releaseHeap) Less(i, j int) bool {
	if a, b := h[i].at(), h[j].at(); a != b {
		return a < b
	}
	if h[i].block.key != h[j].block.key {
		return h[i].block.key < h[j].block.key
	}
	return h[i].offsets[h[i].next] < h[j].offsets[h[j].next]
}
func (h releaseHeap) Swap(i, j int) { h[i], h[j] = h[j], h[i] }
func (h *releaseHeap) Push(x any)   { *h = append(*h, x.(*releaseCursor)) }
func (h *releaseHeap) Pop() any {
	old := *h
	c := old[len(old)-1]
	*h = old[:len(old)-1]
	return c
}

// IPBlockReleases iterates, in block order, the release history of every
// block with a freed address: what snapshots keep of the ip_blocks table.
func (s *Snapshot) IPBlockReleases() iter.Seq[*droverv1.IPBlockReleases] {
	return func(yield func(*droverv1.IPBlockReleases) bool) {
		for b := range all[*ipBlock](s, tableIPBlocks, indexID) {
			if b.releasedAt == nil {
				continue
			}
			rec := &droverv1.IPBlockReleases{Block: []byte(b.key)}
			last := 0
			for off, at := range b.releasedAt {
				if at != 0 {
					last = off + 1
				}
			}
			rec.ReleasedIndex = slices.Clone(b.releasedAt[:last])
			if !yield(rec) {
				return
			}
		}
	}
}

// releasedIndex orders the blocks that have a freed address by their
// oldest release, then by block; the others are left out.
type releasedIndex struct{}

func (releasedIndex) FromObject(obj any) (bool, []byte, error) {
	b, ok := obj.(*ipBlock)
	if !ok {
		return false, nil, fmt.Errorf("released index: unexpected object %T", obj)
	}
	if b.oldest == 0 {
		return false, nil, nil
	}
	return true, append(binary.BigEndian.AppendUint64(nil, b.oldest), b.key...), nil
}

func (releasedIndex) FromArgs(args ...any) ([]byte, error) {
	if len(args) != 0 {
		return nil, fmt.Errorf("released index: takes no arguments, got %d", len(args))
	}
	return nil, nil
}
