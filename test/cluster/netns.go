package cluster

import (
	"errors"
	"net/netip"
	"slices"
)

// Netns starts every server in a network namespace of its own, joined to
// the test's root namespace by a bridge, so that Partition, Isolate, Bridge,
// CutOneWay and Heal can cut the network between servers. Each server
// listens on its namespace's address (ports 4650 and 4651); the test
// process reaches every server through the bridge whatever the cuts. The
// test is skipped where the machine cannot give it namespaces: not root, no
// ip command, or the kernel refuses (see the package documentation).
func Netns() Option { return func(o *options) { o.netns = true } }

// Network describes what a cluster started with Netns made in the root
// namespace, so that a test can check it is gone afterwards.
type Network struct {
	// Bridge is the bridge's name; the test process holds the first
	// address of Subnet on it.
	Bridge string
	// Subnet is the /24 of the servers' addresses.
	Subnet netip.Prefix
	// Namespaces has one namespace per server, in order (s1, s2, ...);
	// the veth that joins each to the bridge has the same name.
	Namespaces []string
}

// Network returns the cluster's network, the zero Network without Netns.
func (c *Cluster) Network() Network {
	if c.net == nil {
		return Network{}
	}
	w := Network{Bridge: c.net.bridgeName(), Subnet: c.net.prefix()}
	for _, s := range c.Servers() {
		w.Namespaces = append(w.Namespaces, s.netns)
	}
	return w
}

// Netns returns the name of the server's network namespace (for ip netns
// exec), or "" when the cluster was not started with Netns.
func (s *Server) Netns() string { return s.netns }

// openNetwork gives the cluster its network, or skips the test where the
// machine has none to give.
func (c *Cluster) openNetwork() {
	c.t.Helper()
	n, err := openNetwork(c.t.Name())
	if errors.Is(err, errNetnsUnsupported) {
		c.t.Skipf("cluster: Netns: %v", err)
	}
	if err != nil {
		c.t.Fatalf("cluster: Netns: %v", err)
	}
	c.net = n
	c.t.Logf("cluster: servers in network namespaces on %s (bridge %s)", n.prefix(), n.bridgeName())
}

// closeNetwork removes the cluster's network once its processes are gone.
func (c *Cluster) closeNetwork() {
	if c.net == nil {
		return
	}
	if err := c.net.close(); err != nil {
		c.t.Errorf("cluster: removing the network of the test: %v", err)
	}
}

// placeServer returns the addresses of server sN: in its own namespace
// with Netns, on loopback ports of its own otherwise.
func (c *Cluster) placeServer(name string, num int) (rpcAddr, raftAddr, ns string) {
	c.t.Helper()
	if c.net != nil {
		s, err := c.net.addServer(name, num)
		if err != nil {
			c.t.Fatalf("cluster: %v", err)
		}
		return netip.AddrPortFrom(s.addr, nsRPCPort).String(), netip.AddrPortFrom(s.addr, nsRaftPort).String(), s.ns
	}
	ports, err := allocPorts(2)
	if err != nil {
		c.t.Fatal(err)
	}
	lo := netip.AddrFrom4([4]byte{127, 0, 0, 1})
	return netip.AddrPortFrom(lo, uint16(ports[0])).String(), netip.AddrPortFrom(lo, uint16(ports[1])).String(), ""
}

// commandLine returns the program and arguments that start the server:
// the binary itself, or ip netns exec with it in the server's namespace.
func (s *Server) commandLine() []string {
	line := append([]string{s.bin}, s.args...)
	if s.netns != "" {
		line = append([]string{s.c.net.ipPath, "netns", "exec", s.netns}, line...)
	}
	return slices.Clip(line)
}
