// Package fit is the resource arithmetic of placement: what a node offers,
// what its allocations hold, and whether a set of allocations fits. The
// scheduler and the leader's plan applier both use it, so the two can never
// disagree on what fits.
//
// An allocation holds its cpu, memory, disk, ports and address until it is
// client-terminal (complete, failed or lost), not merely until the servers
// want it stopped: its agent may still be running it.
package fit

import (
	"fmt"

	droverv1 "github.com/droverhq/drover/proto/drover/v1"
)

// The dynamic port range of a node that does not set its own.
const (
	DefaultMinDynamicPort = 20000
	DefaultMaxDynamicPort = 32000
)

// Dimensions named when something does not fit.
const (
	DimensionCPU    = "cpu"
	DimensionMemory = "memory"
	DimensionDisk   = "disk"
	DimensionPorts  = "ports"
	DimensionIP     = "address"
)

// Holds reports whether an allocation holds resources on its node.
func Holds(a *droverv1.Allocation) bool {
	return !a.ClientTerminal()
}

// DynamicPortRange returns the inclusive range of ports handed out to
// allocations on the node.
func DynamicPortRange(node *droverv1.Node) (first, last int32) {
	first, last = node.GetResources().GetMinDynamicPort(), node.GetResources().GetMaxDynamicPort()
	if first <= 0 || last <= 0 || first > last {
		return DefaultMinDynamicPort, DefaultMaxDynamicPort
	}
	return first, last
}

// FreeDynamicPort draws a port of the node's dynamic range that used does
// not report: from a start drawn by draw (a random number in [0, n)), the
// first free one probing upward, wrapping at the end of the range. The
// scheduler and the plan applier both draw this way, so a port the applier
// gives instead of a taken one is one the scheduler could have picked. It
// reports false when every port of the range is used.
func FreeDynamicPort(node *droverv1.Node, used func(int32) bool, draw func(n int32) int32) (int32, bool) {
	first, last := DynamicPortRange(node)
	span := last - first + 1
	start := draw(span)
	for k := range span {
		if port := first + (start+k)%span; !used(port) {
			return port, true
		}
	}
	return 0, false
}

// Usage is what allocations hold on one node, against what the node offers
// them (its resources minus what is reserved). Build it with NewUsage and
// Add; the zero value is not usable.
//
// A usage may be layered: Overlay makes a usage that starts where a frozen
// one (its base) stands and counts further allocations in its own maps, so
// that many scheduling passes can share one base built from a node's
// stored allocations and each pays only for what it adds.
type Usage struct {
	node *droverv1.Node
	// Capacity left for allocations.
	capCPU, capMemory, capDisk int64
	// Held by the allocations added so far, the base's included.
	CPU, Memory, Disk int64
	// ports maps each port held or reserved on the node to its holder: an
	// allocation id, or "" for the node's own reservation. In an overlay
	// it holds only the ports added on top of the base, and is made on
	// first use: most passes add nothing to most nodes.
	ports map[int32]string
	// ips maps each address held on the node to its allocation.
	ips map[string]string
	// dynamicPorts is the size of the node's dynamic port range;
	// portEntries counts the entries of ports in this layer and those
	// below, at least the ports held (a port held twice counts twice).
	dynamicPorts, portEntries int
	// base is the frozen usage this one lies over, or nil.
	base *Usage
	// failed is the first reason an Add to this usage or one below it
	// reported, or "".
	failed string
	// frozen marks a usage that may be shared: Add panics on it, since a
	// change would show through every overlay and race with their reads.
	frozen bool
}

// NewUsage returns the usage of an empty node: nothing held but the node's
// reserved ports.
func NewUsage(node *droverv1.Node) *Usage {
	res, rsv := node.GetResources(), node.GetReserved()
	first, last := DynamicPortRange(node)
	u := &Usage{
		node:         node,
		capCPU:       res.GetCpuMhz() - rsv.GetCpuMhz(),
		capMemory:    res.GetMemoryMb() - rsv.GetMemoryMb(),
		capDisk:      res.GetDiskMb() - rsv.GetDiskMb(),
		ports:        make(map[int32]string),
		dynamicPorts: int(last - first + 1),
	}
	for _, r := range rsv.GetPorts() {
		for p := r.GetFirst(); p <= r.GetLast() && p > 0; p++ {
			u.ports[p] = ""
		}
	}
	u.portEntries = len(u.ports)
	return u
}

// Node returns the node the usage is for.
func (u *Usage) Node() *droverv1.Node { return u.node }

// ForNode returns a frozen usage that holds what the frozen u holds, for
// node: a later version of u's node that offers what it offered (the same
// resources and reservation objects, see SameOffer). It costs a copy of
// the sums; the layers and maps are shared, as no one writes them.
func (u *Usage) ForNode(node *droverv1.Node) *Usage {
	if !u.frozen {
		panic("fit: ForNode of a usage that is not frozen")
	}
	c := *u
	c.node = node
	return &c
}

// SameOffer reports whether two versions of a node offer allocations the
// same for certain: they share their resources and reservation objects.
// The state shares them between the versions of a node whose row was
// rewritten for anything else (status, eligibility, drain, a report).
func SameOffer(a, b *droverv1.Node) bool {
	// One version, the common case, needs no look at its fields.
	return a == b || a.GetId() == b.GetId() && a.GetResources() == b.GetResources() && a.GetReserved() == b.GetReserved()
}

// Capacity returns what the node offers allocations in total.
func (u *Usage) Capacity() (cpu, memory, disk int64) { return u.capCPU, u.capMemory, u.capDisk }

// Freeze makes u shareable: from now on Add panics on it, and Overlay
// gives usages that read it without copying. It returns u. Call it before
// u is handed to other goroutines.
func (u *Usage) Freeze() *Usage {
	u.frozen = true
	return u
}

// Overlay returns a usage that holds what the frozen u holds and counts
// what is added to it on its own, leaving u unchanged. It costs a copy of
// the sums, not of u's ports and addresses, which it reads through.
func (u *Usage) Overlay() *Usage {
	if !u.frozen {
		panic("fit: Overlay of a usage that is not frozen")
	}
	return &Usage{
		node:   u.node,
		capCPU: u.capCPU, capMemory: u.capMemory, capDisk: u.capDisk,
		CPU: u.CPU, Memory: u.Memory, Disk: u.Disk,
		dynamicPorts: u.dynamicPorts, portEntries: u.portEntries,
		base: u, failed: u.failed,
	}
}

// Failed returns the first reason an Add to u, or to a usage u lies over,
// returned: "" if every allocation counted fit as it was added. The plan
// applier takes a cached usage only when it has none.
func (u *Usage) Failed() string { return u.failed }

// PortsSurelyFree reports whether n ports can surely be drawn from the
// node's dynamic range (FreeDynamicPort) on top of what is held: fewer
// ports are held or reserved, counting every layer's, than the range has
// beyond n. It costs no draw and no lookup; false says only that a draw
// must tell.
func (u *Usage) PortsSurelyFree(n int) bool {
	// The count is kept rather than summed over the layers: this runs on
	// every candidate ranked, and the layers below are cold in the cache.
	return n == 0 || u.portEntries+n <= u.dynamicPorts
}

// PortUsed reports whether a port is held by an allocation or reserved.
func (u *Usage) PortUsed(port int32) bool {
	_, ok := u.portHolder(port)
	return ok
}

// IPUsed reports whether an allocation on the node holds the address.
func (u *Usage) IPUsed(ip string) bool {
	_, ok := u.ipHolder(ip)
	return ok
}

// portHolder returns who holds a port, looking through the layers from
// the top: a port added on top of the base is the newer holder.
func (u *Usage) portHolder(port int32) (string, bool) {
	for l := u; l != nil; l = l.base {
		if holder, ok := l.ports[port]; ok {
			return holder, true
		}
	}
	return "", false
}

// ipHolder returns who holds an address, looking through the layers.
func (u *Usage) ipHolder(ip string) (string, bool) {
	for l := u; l != nil; l = l.base {
		if holder, ok := l.ips[ip]; ok {
			return holder, true
		}
	}
	return "", false
}

// Add counts an allocation's resources, if it holds any. It returns "" if
// everything added so far still fits the node, else the first dimension
// that does not (with detail for ports and addresses). Usage keeps counting
// after a failure, so one pass can name the failing dimension. It panics
// on a frozen usage.
func (u *Usage) Add(a *droverv1.Allocation) string {
	if u.frozen {
		panic("fit: Add to a frozen usage")
	}
	if !Holds(a) {
		return ""
	}
	r := a.GetResources()
	u.CPU += r.GetCpuMhz()
	u.Memory += r.GetMemoryMb()
	u.Disk += r.GetDiskMb()
	failed := u.exceeded()
	for _, p := range r.GetPorts() {
		if holder, taken := u.portHolder(p.GetValue()); taken && failed == "" {
			failed = portCollision(p.GetValue(), holder)
		}
		if u.ports == nil {
			u.ports = make(map[int32]string) // an overlay's, on first use
		}
		u.ports[p.GetValue()] = a.GetId()
		u.portEntries++
	}
	if ip := r.GetIp(); ip != "" {
		if holder, taken := u.ipHolder(ip); taken && failed == "" {
			failed = fmt.Sprintf("%s %s already held by allocation %s", DimensionIP, ip, holder)
		}
		if u.ips == nil {
			u.ips = make(map[string]string) // most jobs ask for no address
		}
		u.ips[ip] = a.GetId()
	}
	if u.failed == "" {
		u.failed = failed
	}
	return failed
}

// Exceeded returns the first of cpu, memory and disk that is over the
// node's capacity, or "".
func (u *Usage) exceeded() string {
	switch {
	case u.CPU > u.capCPU:
		return DimensionCPU
	case u.Memory > u.capMemory:
		return DimensionMemory
	case u.Disk > u.capDisk:
		return DimensionDisk
	}
	return ""
}

// Fits reports whether an allocation asking for res would fit on top of
// what is held: cpu, memory, disk and static ports. Dynamic ports are
// checked when they are assigned. It returns "" or the first dimension that
// does not fit.
func (u *Usage) Fits(res *droverv1.Resources) string {
	switch {
	case u.CPU+res.GetCpuMhz() > u.capCPU:
		return DimensionCPU
	case u.Memory+res.GetMemoryMb() > u.capMemory:
		return DimensionMemory
	case u.Disk+res.GetDiskMb() > u.capDisk:
		return DimensionDisk
	}
	for _, p := range res.GetPorts() {
		if p.GetValue() > 0 && u.PortUsed(p.GetValue()) {
			return DimensionPorts
		}
	}
	return ""
}

func portCollision(port int32, holder string) string {
	if holder == "" {
		return fmt.Sprintf("%s: port %d is reserved on the node", DimensionPorts, port)
	}
	return fmt.Sprintf("%s: port %d already held by allocation %s", DimensionPorts, port, holder)
}

// AllocsFit reports whether allocations fit on a node together: cpu, memory
// and disk within the node's capacity minus its reservation, no port held
// twice or reserved, no address held twice. Client-terminal allocations
// hold nothing and are skipped. When they do not fit, the reason names the
// dimension first ("cpu", "memory", "disk", "ports: ...", "address ...").
func AllocsFit(node *droverv1.Node, allocs []*droverv1.Allocation) (ok bool, reason string, usage *Usage) {
	usage = NewUsage(node)
	for _, a := range allocs {
		if failed := usage.Add(a); failed != "" && reason == "" {
			reason = failed
		}
	}
	return reason == "", reason, usage
}
