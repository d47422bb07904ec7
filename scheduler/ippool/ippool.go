// Package ippool chooses allocation addresses from the cluster's allocation
// network in the order that keeps a released address out of use longest:
// addresses no allocation has held yet first, then the one released
// longest ago. An address released a moment ago is therefore the last to
// be handed out again, so traffic still on its way to the allocation that
// had it does not reach a new one.
//
// The scheduler proposes addresses with a Picker on its snapshot; the plan
// applier, which sees the newest state, uses one to replace a proposal that
// a plan committed in the meantime has taken. Both follow the same rule.
package ippool

import (
	"encoding/binary"
	"net/netip"
)

// Source is what the state store knows about the network's addresses.
type Source interface {
	// NeverUsedIP returns the first address from from through last that
	// no allocation has held; ok is false when there is none.
	NeverUsedIP(from, last netip.Addr) (netip.Addr, bool)
	// ReleasedIPs returns a function that yields, one per call, the
	// addresses released and not held since, the longest released first,
	// with the raft index of the release; ok is false at the end.
	ReleasedIPs() func() (addr netip.Addr, index uint64, ok bool)
}

// Picker hands out free addresses of one network, each at most once.
// Never-used addresses all count as equally old, so the first is searched
// from a random place and later ones follow it (wrapping around): pickers
// running at once on different workers draw from different stretches of
// the network rather than all wanting the same address. Released addresses
// are handed out strictly by age; pickers running at once want the same
// ones, and the plan applier gives a placement whose address was taken
// meanwhile the next one by the same rule rather than dropping it.
//
// A Picker works on one unchanging view of the state and is not safe for
// concurrent use.
type Picker struct {
	src Source
	// taken reports addresses that are not free for reasons src does not
	// know (picked by this plan, held by a plan not yet applied).
	taken  func(netip.Addr) bool
	prefix netip.Prefix
	// lo and hi bound the usable offsets from the prefix's first address;
	// ok is false when the prefix has none.
	lo, hi uint64
	ok     bool

	// start draws where the first search for a never-used address begins,
	// an offset below span.
	start func(span uint64) uint64
	// cursor is where the next search for a never-used address begins,
	// once started.
	cursor  uint64
	started bool
	// neverUsedGone is set once a search has found no never-used address
	// left: the view does not change, so none will appear.
	neverUsedGone bool
	// picked are the never-used addresses handed out, which the view still
	// counts as never used when a search comes round to them again.
	picked map[netip.Addr]struct{}
	// released yields the freed addresses by age; nil until needed.
	released func() (netip.Addr, uint64, bool)
}

// New returns a picker of prefix's usable addresses. taken may be nil;
// start draws the offset (below span) of the first never-used search, as
// a random number would.
func New(prefix netip.Prefix, src Source, taken func(netip.Addr) bool, start func(span uint64) uint64) *Picker {
	p := &Picker{src: src, taken: taken, start: start}
	if !prefix.IsValid() {
		return p
	}
	p.prefix = prefix.Masked()
	p.lo, p.hi, p.ok = UsableOffsets(p.prefix)
	if p.taken == nil {
		p.taken = func(netip.Addr) bool { return false }
	}
	return p
}

// Enabled reports whether the picker has a network at all.
func (p *Picker) Enabled() bool { return p.prefix.IsValid() }

// Pick returns a free address, never one picked before: a never-used one
// while any is left, else the one released longest ago. ok is false when
// every usable address is taken.
func (p *Picker) Pick() (netip.Addr, bool) {
	if !p.ok {
		return netip.Addr{}, false
	}
	if !p.neverUsedGone {
		if addr, ok := p.neverUsed(); ok {
			return addr, true
		}
		p.neverUsedGone = true
	}
	return p.oldestReleased()
}

// contains reports whether addr is a usable address of the network.
func (p *Picker) contains(addr netip.Addr) bool {
	if !p.ok || !p.prefix.Contains(addr) {
		return false
	}
	off := offsetOf(p.prefix.Addr(), addr)
	return off >= p.lo && off <= p.hi
}

// maxHostBits bounds the part of an IPv6 prefix addresses are drawn from,
// so offsets fit in a uint64.
const maxHostBits = 63

// UsableOffsets returns the range of offsets from the prefix's first
// address that may be handed out. The first address is never used (the
// network address of IPv4, the subnet-router anycast address of IPv6), nor
// the last of IPv4 (broadcast).
func UsableOffsets(prefix netip.Prefix) (lo, hi uint64, ok bool) {
	hostBits := min(prefix.Addr().BitLen()-prefix.Bits(), maxHostBits)
	size := uint64(1) << hostBits
	lo, hi = 1, size-1
	if prefix.Addr().Is4() {
		hi = size - 2
	}
	return lo, hi, hostBits > 0 && lo <= hi
}

// neverUsed searches upward from the cursor to the end of the usable
// range, then from its start up to the cursor, for an address no
// allocation has held and this picker has not handed out.
func (p *Picker) neverUsed() (netip.Addr, bool) {
	start := p.cursor
	if !p.started {
		start = p.lo + p.start(p.hi-p.lo+1)
	}
	segments := [][2]uint64{{start, p.hi}}
	if start > p.lo {
		segments = append(segments, [2]uint64{p.lo, start - 1})
	}
	base := p.prefix.Addr()
	for _, seg := range segments {
		from, last := addrAt(base, seg[0]), addrAt(base, seg[1])
		for {
			free, ok := p.src.NeverUsedIP(from, last)
			if !ok {
				break
			}
			if _, again := p.picked[free]; !again && !p.taken(free) {
				if p.picked == nil {
					p.picked = make(map[netip.Addr]struct{})
				}
				p.picked[free] = struct{}{}
				p.started, p.cursor = true, offsetOf(base, free)+1
				if p.cursor > p.hi {
					p.cursor = p.lo
				}
				return free, true
			}
			if free == last {
				break
			}
			from = free.Next()
		}
	}
	return netip.Addr{}, false
}

// oldestReleased returns the free address released longest ago that lies
// in the network and is not taken.
func (p *Picker) oldestReleased() (netip.Addr, bool) {
	if p.released == nil {
		p.released = p.src.ReleasedIPs()
	}
	for {
		addr, _, ok := p.released()
		if !ok {
			return netip.Addr{}, false
		}
		if p.prefix.Addr().Is6() {
			// The state writes IPv4-mapped addresses as IPv4.
			addr = netip.AddrFrom16(addr.As16())
		}
		if p.contains(addr) && !p.taken(addr) {
			return addr, true
		}
	}
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
