package droverv1

import (
	"hash/fnv"
	"slices"
	"strconv"
)

// ComputedClass identifies nodes that look alike to feasibility checks: the
// same datacenter, node class and attributes. The scheduler caches
// constraint results per class, and a blocked evaluation records which
// classes it found infeasible, so that capacity appearing on a node of such
// a class does not wake it for nothing.
func (n *Node) ComputedClass() string {
	h := fnv.New64a()
	write := func(s string) {
		_, _ = h.Write([]byte(s))
		_, _ = h.Write([]byte{0})
	}
	write(n.GetDatacenter())
	write(n.GetNodeClass())
	attrs := n.GetAttributes()
	keys := make([]string, 0, len(attrs))
	for k := range attrs {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	for _, k := range keys {
		write(k)
		write(attrs[k])
	}
	return "v1:" + strconv.FormatUint(h.Sum64(), 16)
}
