package scheduler

import (
	"encoding/binary"
	"math/rand/v2"
	"net/netip"
	"slices"

	droverv1 "github.com/droverhq/drover/proto/drover/v1"
	"github.com/droverhq/drover/scheduler/fit"
)

// assignPorts picks an allocation's ports on a node, in the order asked,
// into dst: static ports as asked (Usage.Fits has checked they are free),
// dynamic ones at a random place in the node's dynamic range, probing
// upward past ports that are held, reserved or already picked. It reports
// false when the range has no free port left.
func assignPorts(u *fit.Usage, asks []*droverv1.Port, node *droverv1.Node, rng *rand.Rand, dst []int32) ([]int32, bool) {
	dst = dst[:0]
	for _, p := range asks {
		dst = append(dst, max(p.GetValue(), 0))
	}
	for i, p := range dst {
		if p != 0 {
			continue
		}
		first, last := fit.DynamicPortRange(node)
		span := last - first + 1
		start := rng.Int32N(span)
		for k := range span {
			port := first + (start+k)%span
			if !u.PortUsed(port) && !slices.Contains(dst, port) {
				dst[i] = port
				break
			}
		}
		if dst[i] == 0 {
			return dst, false
		}
	}
	return dst, true
}

// freeIPFinder is what the state store's snapshot offers to find a free
// address without probing one address at a time.
type freeIPFinder interface {
	// FreeIPInBlock returns the first address not held by an allocation in
	// the block of 256 addresses that contains from, at or after from.
	FreeIPInBlock(from netip.Addr) (netip.Addr, bool)
}

// addressPicker hands out allocation addresses from the cluster's
// allocation network: never one that an allocation that is not
// client-terminal holds, nor one this plan has already handed out.
type addressPicker struct {
	ctx    *evalContext
	prefix netip.Prefix
	// lo and hi bound the usable offsets from the prefix's first address;
	// ok is false when the prefix has none.
	lo, hi uint64
	ok     bool
	finder freeIPFinder
	// cursor is where the next pick starts scanning, once one address has
	// been picked: a pass takes consecutive free addresses from one random
	// start, so passes running at once on other workers draw from
	// different stretches of the network instead of colliding at random
	// (the birthday problem makes random picks of a thousand addresses per
	// pass collide often, and each collision costs a rejected plan).
	cursor  uint64
	started bool
}

func newAddressPicker(ctx *evalContext) *addressPicker {
	p := &addressPicker{ctx: ctx}
	if !ctx.cfg.AllocCIDR.IsValid() {
		return p
	}
	p.prefix = ctx.cfg.AllocCIDR.Masked()
	p.lo, p.hi, p.ok = usableOffsets(p.prefix)
	p.finder, _ = ctx.state.(freeIPFinder)
	return p
}

// enabled reports whether allocations get an address at all.
func (p *addressPicker) enabled() bool { return p.prefix.IsValid() }

// maxHostBits bounds the part of an IPv6 prefix addresses are drawn from,
// so offsets fit in a uint64.
const maxHostBits = 63

// usableOffsets returns the range of offsets from the prefix's first
// address that may be handed out. The first address is never used (the
// network address of IPv4, the subnet-router anycast address of IPv6), nor
// the last of IPv4 (broadcast).
func usableOffsets(prefix netip.Prefix) (lo, hi uint64, ok bool) {
	hostBits := min(prefix.Addr().BitLen()-prefix.Bits(), maxHostBits)
	size := uint64(1) << hostBits
	lo, hi = 1, size-1
	if prefix.Addr().Is4() {
		hi = size - 2
	}
	return lo, hi, hostBits > 0 && lo <= hi
}

// pick returns a free address: the first pick of a pass starts at a random
// one, later picks where the previous one ended, scanning upward (wrapping
// around) so that freed addresses are not reused before the rest of the
// network has been used. ok is false when every usable
// address is taken.
func (p *addressPicker) pick() (netip.Addr, bool) {
	if !p.ok {
		return netip.Addr{}, false
	}
	base := p.prefix.Addr()
	span := p.hi - p.lo + 1
	off := p.cursor
	if !p.started {
		off = p.lo + p.ctx.rng.Uint64N(span)
	}
	for scanned := uint64(0); scanned < span; {
		addr := addrAt(base, off)
		free, found := p.firstFree(addr)
		end := p.blockEnd(addr)
		if found {
			if f := offsetOf(base, free); p.prefix.Contains(free) && f <= end {
				if _, inPlan := p.ctx.planIPs[free]; !inPlan {
					p.started, p.cursor = true, f+1
					if p.cursor > p.hi {
						p.cursor = p.lo
					}
					return free, true
				}
				end = f
			}
		}
		// Nothing usable from off through end.
		scanned += end - off + 1
		off = end + 1
		if off > p.hi {
			off = p.lo
		}
	}
	return netip.Addr{}, false
}

// firstFree returns the first address at or after addr that no allocation
// holds, within addr's block when the state can search blocks, else addr
// itself if it is free.
func (p *addressPicker) firstFree(addr netip.Addr) (netip.Addr, bool) {
	if p.finder != nil {
		return p.finder.FreeIPInBlock(addr)
	}
	return addr, !p.ctx.state.AllocIPHeld(addr.String())
}

// blockEnd returns the offset of the last usable address firstFree(addr)
// searched: the end of addr's block of 256 (or of the usable range, if
// sooner), or addr itself when the state cannot search blocks.
func (p *addressPicker) blockEnd(addr netip.Addr) uint64 {
	base := p.prefix.Addr()
	if p.finder == nil {
		return offsetOf(base, addr)
	}
	b := addr.As16()
	b[15] = 0xff
	last := netip.AddrFrom16(b)
	if addr.Is4() {
		last = last.Unmap()
	}
	if !p.prefix.Contains(last) {
		return p.hi
	}
	return min(offsetOf(base, last), p.hi)
}

// addrAt returns the address off past base, a prefix's first address.
func addrAt(base netip.Addr, off uint64) netip.Addr {
	if base.Is4() {
		b := base.As4()
		binary.BigEndian.PutUint32(b[:], binary.BigEndian.Uint32(b[:])|uint32(off))
		return netip.AddrFrom4(b)
	}
	b := base.As16()
	binary.BigEndian.PutUint64(b[8:], binary.BigEndian.Uint64(b[8:])|off)
	return netip.AddrFrom16(b)
}

// offsetOf returns how far addr lies past base, in the low 64 bits.
func offsetOf(base, addr netip.Addr) uint64 {
	if base.Is4() {
		a, b := addr.As4(), base.As4()
		return uint64(binary.BigEndian.Uint32(a[:]) - binary.BigEndian.Uint32(b[:]))
	}
	a, b := addr.As16(), base.As16()
	return binary.BigEndian.Uint64(a[8:]) - binary.BigEndian.Uint64(b[8:])
}
