package cluster

import (
	"fmt"
	"maps"
	"strings"
)

// A link is one direction between two servers (by their harness names, sN):
// a cut link drops every packet from `from` to `to`.
type link struct{ from, to string }

// cutSet is the set of cut links in force.
type cutSet map[link]bool

// partitionCuts cuts both directions between every two servers of
// different groups. Servers in no group are not mentioned and so keep
// every link.
func partitionCuts(groups [][]string) cutSet {
	cuts := cutSet{}
	for i, g := range groups {
		for _, h := range groups[i+1:] {
			for _, a := range g {
				for _, b := range h {
					cuts[link{a, b}] = true
					cuts[link{b, a}] = true
				}
			}
		}
	}
	return cuts
}

// halves splits servers, in order, into a first half (the larger one when
// their number is odd) and a second.
func halves[T any](servers []T) (first, second []T) {
	k := (len(servers) + 1) / 2
	return servers[:k:k], servers[k:]
}

// Partition cuts the network between the groups of servers: no packet
// passes between two servers of different groups, in either direction, on
// new or established connections. A server named in no group keeps its
// links to every server (so Partition([s1 s2], [s4 s5]) leaves s3 as a
// bridge); list every server to split the whole cluster. The test process
// reaches every server whatever the partition. It replaces the cuts in
// force (see Heal) and needs a cluster started with Netns.
func (c *Cluster) Partition(groups ...[]*Server) {
	c.t.Helper()
	if len(groups) < 2 {
		c.t.Fatalf("cluster: Partition needs at least two groups, got %d", len(groups))
	}
	seen := map[*Server]bool{}
	groupNames := make([][]string, len(groups))
	parts := make([]string, len(groups))
	for i, g := range groups {
		if len(g) == 0 {
			c.t.Fatalf("cluster: Partition: group %d is empty", i+1)
		}
		for _, s := range g {
			if seen[s] {
				c.t.Fatalf("cluster: Partition: %s is in two groups", s)
			}
			seen[s] = true
		}
		groupNames[i], parts[i] = c.members(g), names(g)
	}
	c.replaceCuts("partition "+strings.Join(parts, " | "), partitionCuts(groupNames))
}

// Isolate cuts s off from every other server, as Partition([s], others).
func (c *Cluster) Isolate(s *Server) {
	c.t.Helper()
	name := c.member(s)
	others := c.Others(s)
	if len(others) == 0 {
		c.t.Fatalf("cluster: Isolate %s: no other server", s)
	}
	c.replaceCuts("isolate "+s.String(), partitionCuts([][]string{{name}, c.members(others)}))
}

// Bridge splits the other servers, in order (s1, s2, ...), into two halves
// that cannot reach each other, while bridge keeps its links to both: the
// topology in which a server sees two sides that do not see each other. It
// returns the halves. It replaces the cuts in force.
func (c *Cluster) Bridge(bridge *Server) (first, second []*Server) {
	c.t.Helper()
	c.member(bridge)
	first, second = halves(c.Others(bridge))
	if len(first) == 0 || len(second) == 0 {
		c.t.Fatalf("cluster: Bridge %s: needs at least two other servers", bridge)
	}
	c.replaceCuts(fmt.Sprintf("bridge %s between %s and %s", bridge, names(first), names(second)),
		partitionCuts([][]string{c.members(first), c.members(second)}))
	return first, second
}

// CutOneWay drops every packet that from sends to to, and none that to
// sends to from, adding to the cuts in force. TCP needs both directions, so
// connections between the two stall either way; what differs from a
// symmetric cut is which packets still arrive (see the package
// documentation).
func (c *Cluster) CutOneWay(from, to *Server) {
	c.t.Helper()
	if from == to {
		c.t.Fatalf("cluster: CutOneWay: %s to itself", from)
	}
	l := link{c.member(from), c.member(to)}
	c.changeCuts(fmt.Sprintf("one-way cut %s -> %s", from, to), func(old cutSet) cutSet {
		cuts := cutSet{l: true}
		maps.Copy(cuts, old)
		return cuts
	})
}

// Heal lifts every cut: each server reaches every other again.
func (c *Cluster) Heal() {
	c.t.Helper()
	c.replaceCuts("heal", cutSet{})
}

// member returns the harness name of s, failing the test unless s is a
// server of this cluster.
func (c *Cluster) member(s *Server) string {
	c.t.Helper()
	if s == nil || s.c != c {
		c.t.Fatalf("cluster: %v is not a server of this cluster", s)
	}
	return s.name
}

// members returns the harness names of servers (see member).
func (c *Cluster) members(servers []*Server) []string {
	out := make([]string, len(servers))
	for i, s := range servers {
		out[i] = c.member(s)
	}
	return out
}

// replaceCuts makes cuts the links cut (see changeCuts).
func (c *Cluster) replaceCuts(what string, cuts cutSet) {
	c.t.Helper()
	c.changeCuts(what, func(cutSet) cutSet { return cuts })
}

// changeCuts makes next(cuts in force) the links cut, changing only what
// differs, and logs what. Changes are applied one at a time.
func (c *Cluster) changeCuts(what string, next func(cutSet) cutSet) {
	c.t.Helper()
	if c.net == nil {
		c.t.Fatalf("cluster: %s: the cluster was not started with Netns", what)
	}
	c.netMu.Lock()
	defer c.netMu.Unlock()
	cuts := next(c.cuts)
	if err := c.net.setCuts(c.cuts, cuts); err != nil {
		c.t.Fatalf("cluster: %s: %v", what, err)
	}
	c.cuts = cuts
	c.t.Logf("cluster: %s (%d links cut)", what, len(cuts))
}
