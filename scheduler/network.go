package scheduler

import (
	"math/rand/v2"
	"net/netip"
	"slices"

	droverv1 "github.com/droverhq/drover/proto/drover/v1"
	"github.com/droverhq/drover/scheduler/fit"
	"github.com/droverhq/drover/scheduler/ippool"
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
		port, ok := fit.FreeDynamicPort(node, func(port int32) bool {
			return u.PortUsed(port) || slices.Contains(dst, port)
		}, rng.Int32N)
		if ok {
			dst[i] = port
		}
		if dst[i] == 0 {
			return dst, false
		}
	}
	return dst, true
}

// newAddressPicker returns the pass's picker of allocation addresses from
// the cluster's allocation network: never one that an allocation that is
// not client-terminal holds, nor one this plan has already handed out;
// never-used addresses first, then the one released longest ago.
func newAddressPicker(ctx *evalContext) *ippool.Picker {
	taken := func(a netip.Addr) bool {
		_, ok := ctx.planIPs[a]
		return ok
	}
	return ippool.New(ctx.cfg.AllocCIDR, ctx.state, taken, ctx.rng.Uint64N)
}
