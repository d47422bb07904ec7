package cluster

import (
	"errors"
	"fmt"
	"maps"
	"math/rand/v2"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"sync"
	"syscall"
	"time"
)

// Names and numbers of the networks of Netns clusters. Slot k (a /24) is
// 10.213.k.0/24: the bridge drvt<k>b holds .1, server sN lives in the
// namespace drvt<k>s<N> at .(10+N), joined to the bridge by the veth
// drvt<k>s<N> (its end inside the namespace is eth0). A process owns slot k
// while it holds an flock on <lockDir>/<k>.lock; the kernel drops the lock
// when the process dies, so whatever carries the names of a slot nobody
// holds is a leftover of a dead process.
const (
	netPrefix = "drvt"
	lockDir   = "/run/drover-test-netns"
	netSlots  = 256
	// hostOffset is added to a server's number for its address.
	hostOffset = 10
	// guardMetric marks the unreachable route that covers a slot's /24 in
	// the root namespace while the slot is held, so that nothing sent to
	// the slot's addresses before its bridge is up or after it is gone
	// leaves the machine by the default route.
	guardMetric = 4242
	// cutPref is the priority of the rules that drop a peer's packets on
	// input; localPref is where the local table's rule moves to, after
	// them (it is at 0, ahead of everything, by default).
	cutPref   = 10
	localPref = 100
	innerDev  = "eth0"
	// The ports every server listens on at its namespace's address.
	nsRPCPort  = 4650
	nsRaftPort = 4651
	// ipTimeout bounds one run of the ip command.
	ipTimeout = 30 * time.Second
)

// netBase holds the first two octets of every slot's /24.
var netBase = [2]byte{10, 213}

// netName matches the names of the harness's namespaces and links:
// drvt<slot>b for a bridge, drvt<slot>s<N> for a namespace or veth.
var netName = regexp.MustCompile(`^` + netPrefix + `(\d{1,3})(b|s\d{1,3})$`)

// network is the bridge, namespaces and veths of one cluster started with
// Netns, and the lock on its slot.
type network struct {
	ipPath string
	slot   int
	lock   *os.File

	mu      sync.Mutex
	servers map[string]netServer // by harness name (sN)
}

// netServer is one server's place in the network.
type netServer struct {
	ns   string // the namespace's name; the root-side veth has the same
	addr netip.Addr
}

// errNetnsUnsupported wraps the reasons a test is skipped: the machine
// cannot give the harness network namespaces.
var errNetnsUnsupported = errors.New("network namespaces are not available")

// openNetwork takes a free slot, removes the leftovers of dead processes,
// and creates the slot's bridge. owner names the test in the lock file.
func openNetwork(owner string) (*network, error) {
	if euid := os.Geteuid(); euid != 0 {
		return nil, fmt.Errorf("%w: creating them needs root, and this is euid %d", errNetnsUnsupported, euid)
	}
	ipPath, err := exec.LookPath("ip")
	if err != nil {
		return nil, fmt.Errorf("%w: no ip command (iproute2): %w", errNetnsUnsupported, err)
	}
	if err := os.MkdirAll(lockDir, 0o755); err != nil {
		return nil, fmt.Errorf("lock dir for network slots: %w", err)
	}
	n := &network{ipPath: ipPath, servers: map[string]netServer{}}
	if err := n.sweep(); err != nil {
		return nil, deniedAsUnsupported(err)
	}
	start := rand.IntN(netSlots)
	for k := range netSlots {
		ok, err := n.claim((start+k)%netSlots, owner)
		if err != nil {
			return nil, deniedAsUnsupported(err)
		}
		if !ok {
			continue
		}
		if err := n.createBridge(); err != nil {
			_ = n.close()
			return nil, deniedAsUnsupported(err)
		}
		return n, nil
	}
	return nil, fmt.Errorf("no free network slot among %d in %s", netSlots, lockDir)
}

// claim takes slot for n if no live process holds it and nothing else on
// the machine uses its addresses, after removing what a dead holder left.
func (n *network) claim(slot int, owner string) (bool, error) {
	lock, err := lockSlot(slot, owner)
	if err != nil || lock == nil {
		return false, err
	}
	n.slot, n.lock = slot, lock
	inv, err := n.inventory()
	if err == nil {
		err = n.remove(slot, inv.bySlot[slot])
	}
	if err != nil || inv.clash(slot) {
		n.unlock()
		return false, err
	}
	return true, nil
}

// lockSlot takes the slot's lock without waiting. It returns nil, nil when
// another process (or another cluster of this one) holds it.
func lockSlot(slot int, owner string) (*os.File, error) {
	f, err := os.OpenFile(filepath.Join(lockDir, strconv.Itoa(slot)+".lock"), os.O_RDWR|os.O_CREATE, 0o644)
	if err != nil {
		return nil, fmt.Errorf("network slot %d: %w", slot, err)
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		_ = f.Close()
		if errors.Is(err, syscall.EWOULDBLOCK) {
			return nil, nil
		}
		return nil, fmt.Errorf("network slot %d: flock: %w", slot, err)
	}
	// For a person who finds the slot in use: who holds it.
	if err := f.Truncate(0); err == nil {
		_, _ = fmt.Fprintf(f, "pid %d: %s\n", os.Getpid(), owner)
	}
	return f, nil
}

func (n *network) unlock() {
	if n.lock != nil {
		_ = n.lock.Close() // closing the only descriptor drops the flock
		n.lock = nil
	}
}

// prefix is the slot's /24.
func (n *network) prefix() netip.Prefix {
	return netip.PrefixFrom(netip.AddrFrom4([4]byte{netBase[0], netBase[1], byte(n.slot), 0}), 24)
}

func (n *network) host(h int) netip.Addr {
	return netip.AddrFrom4([4]byte{netBase[0], netBase[1], byte(n.slot), byte(h)})
}

func (n *network) bridgeName() string { return netPrefix + strconv.Itoa(n.slot) + "b" }

// createBridge adds the guard route, then the bridge with the address the
// test process reaches the servers from.
func (n *network) createBridge() error {
	br := n.bridgeName()
	return n.batch("", []string{
		fmt.Sprintf("route add unreachable %s metric %d", n.prefix(), guardMetric),
		"link add " + br + " type bridge",
		fmt.Sprintf("addr add %s/24 dev %s", n.host(1), br),
		"link set " + br + " up",
	})
}

// addServer creates server sN's namespace (name is sN) and its veth, and
// returns the namespace's name and the server's address.
func (n *network) addServer(name string, num int) (netServer, error) {
	if num < 1 || num+hostOffset > 254 {
		return netServer{}, fmt.Errorf("server %s: number %d does not fit the /24 of a network slot", name, num)
	}
	s := netServer{ns: netPrefix + strconv.Itoa(n.slot) + "s" + strconv.Itoa(num), addr: n.host(num + hostOffset)}
	err := n.batch("", []string{
		"netns add " + s.ns,
		"link add " + s.ns + " type veth peer name " + innerDev + " netns " + s.ns,
		"link set " + s.ns + " master " + n.bridgeName(),
		"link set " + s.ns + " up",
	})
	if err == nil {
		err = n.batch(s.ns, []string{
			fmt.Sprintf("addr add %s/24 dev %s", s.addr, innerDev),
			"link set " + innerDev + " up",
			// The server reaches its own address through lo.
			"link set lo up",
			// Cut rules act on input, before local delivery, so they must
			// come ahead of the local table's rule.
			fmt.Sprintf("rule add pref %d lookup local", localPref),
			"rule del pref 0",
		})
	}
	if err != nil {
		return netServer{}, fmt.Errorf("network namespace of %s: %w", name, err)
	}
	n.mu.Lock()
	n.servers[name] = s
	n.mu.Unlock()
	return s, nil
}

// setCuts changes the cut links from old to cuts. A cut from A to B is a
// rule in B's namespace that drops, on input, every packet from A's
// address: silently, for established connections as for new ones, before
// any socket sees it (A's connects time out, as across a real partition).
// New cuts are added before old ones are lifted, so that moving from one
// partition to another never heals for a moment.
func (n *network) setCuts(old, cuts cutSet) error {
	n.mu.Lock()
	servers := maps.Clone(n.servers)
	n.mu.Unlock()
	for _, step := range []struct {
		op       string
		from, to cutSet
	}{{"add", cuts, old}, {"del", old, cuts}} {
		byDest := map[string][]string{}
		for l := range step.from {
			if !step.to[l] {
				byDest[l.to] = append(byDest[l.to], l.from)
			}
		}
		for _, to := range slices.Sorted(maps.Keys(byDest)) {
			dst, ok := servers[to]
			if !ok {
				return fmt.Errorf("cut to %s: not a server of this network", to)
			}
			var cmds []string
			for _, from := range slices.Sorted(slices.Values(byDest[to])) {
				src, ok := servers[from]
				if !ok {
					return fmt.Errorf("cut from %s: not a server of this network", from)
				}
				cmds = append(cmds, fmt.Sprintf("rule %s pref %d from %s/32 iif %s blackhole", step.op, cutPref, src.addr, innerDev))
			}
			if err := n.batch(dst.ns, cmds); err != nil {
				return fmt.Errorf("cuts into %s: %w", to, err)
			}
		}
	}
	return nil
}

// close removes everything of the slot (whether or not its creation
// completed), then gives the slot up. Were it left to a later sweep, that
// would leave it to the next test run.
func (n *network) close() error {
	defer n.unlock()
	inv, err := n.inventory()
	if err != nil {
		return err
	}
	return n.remove(n.slot, inv.bySlot[n.slot])
}
