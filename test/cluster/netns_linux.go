package cluster

import (
	"bytes"
	"context"
	"encoding/json"
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
	"strings"
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

// netLeftovers is what exists of one slot.
type netLeftovers struct {
	namespaces, links []string
	guard             bool
}

// remove deletes what exists of slot: links first, then namespaces, then
// the guard route; it tries every step. Deleting a root-side veth deletes
// its peer at once, whereas a namespace outlives its name (and keeps its
// veth pair) while a socket of a killed server is still closing.
func (n *network) remove(slot int, l *netLeftovers) error {
	if l == nil {
		return nil
	}
	var cmds []string
	for _, name := range slices.Sorted(slices.Values(l.links)) {
		cmds = append(cmds, "link del "+name)
	}
	for _, name := range slices.Sorted(slices.Values(l.namespaces)) {
		cmds = append(cmds, "netns del "+name)
	}
	if l.guard {
		p := netip.PrefixFrom(netip.AddrFrom4([4]byte{netBase[0], netBase[1], byte(slot), 0}), 24)
		cmds = append(cmds, fmt.Sprintf("route del unreachable %s metric %d", p, guardMetric))
	}
	return n.batch("", cmds)
}

// sweep removes the leftovers of every slot that no live process holds.
func (n *network) sweep() error {
	inv, err := n.inventory()
	if err != nil {
		return err
	}
	var errs []error
	for _, slot := range slices.Sorted(maps.Keys(inv.bySlot)) {
		lock, err := lockSlot(slot, "sweep")
		if err != nil {
			errs = append(errs, err)
			continue
		}
		if lock == nil {
			continue // its owner is alive
		}
		if err := n.remove(slot, inv.bySlot[slot]); err != nil {
			errs = append(errs, fmt.Errorf("leftovers of network slot %d: %w", slot, err))
		}
		_ = lock.Close()
	}
	return errors.Join(errs...)
}

// netInventory is what exists in the root namespace: the harness's names by
// slot, and every IPv4 route.
type netInventory struct {
	bySlot map[int]*netLeftovers
	routes []ipRoute
}

type ipRoute struct {
	Type   string `json:"type"`
	Dst    string `json:"dst"`
	Dev    string `json:"dev"`
	Metric int    `json:"metric"`
}

func (n *network) inventory() (netInventory, error) {
	inv := netInventory{bySlot: map[int]*netLeftovers{}}
	of := func(slot int) *netLeftovers {
		if inv.bySlot[slot] == nil {
			inv.bySlot[slot] = &netLeftovers{}
		}
		return inv.bySlot[slot]
	}
	var nss []struct {
		Name string `json:"name"`
	}
	if err := n.listJSON(&nss, "netns", "list"); err != nil {
		return inv, err
	}
	for _, ns := range nss {
		if slot, ok := slotOf(ns.Name); ok {
			of(slot).namespaces = append(of(slot).namespaces, ns.Name)
		}
	}
	var links []struct {
		Name string `json:"ifname"`
	}
	if err := n.listJSON(&links, "link", "show"); err != nil {
		return inv, err
	}
	for _, l := range links {
		if slot, ok := slotOf(l.Name); ok {
			of(slot).links = append(of(slot).links, l.Name)
		}
	}
	if err := n.listJSON(&inv.routes, "-4", "route", "show", "table", "all"); err != nil {
		return inv, err
	}
	for _, r := range inv.routes {
		if slot, ok := guardSlot(r); ok {
			of(slot).guard = true
		}
	}
	return inv, nil
}

// slotOf returns the slot a namespace or link name of the harness belongs
// to.
func slotOf(name string) (int, bool) {
	m := netName.FindStringSubmatch(name)
	if m == nil {
		return 0, false
	}
	slot, err := strconv.Atoi(m[1])
	if err != nil || slot >= netSlots || strconv.Itoa(slot) != m[1] {
		return 0, false
	}
	return slot, true
}

// guardSlot returns the slot whose guard route r is.
func guardSlot(r ipRoute) (int, bool) {
	if r.Type != "unreachable" || r.Metric != guardMetric {
		return 0, false
	}
	p, err := netip.ParsePrefix(r.Dst)
	if err != nil || p.Bits() != 24 || !p.Addr().Is4() {
		return 0, false
	}
	a := p.Addr().As4()
	if a[0] != netBase[0] || a[1] != netBase[1] || a[3] != 0 {
		return 0, false
	}
	return int(a[2]), true
}

// clash reports whether a route that is not the slot's own overlaps its
// /24.
func (inv netInventory) clash(slot int) bool {
	p := netip.PrefixFrom(netip.AddrFrom4([4]byte{netBase[0], netBase[1], byte(slot), 0}), 24)
	ours := netPrefix + strconv.Itoa(slot) + "b"
	for _, r := range inv.routes {
		if r.Dev == ours {
			continue
		}
		if s, ok := guardSlot(r); ok && s == slot {
			continue
		}
		var q netip.Prefix
		if a, err := netip.ParseAddr(r.Dst); err == nil {
			q = netip.PrefixFrom(a, a.BitLen())
		} else if q, err = netip.ParsePrefix(r.Dst); err != nil {
			continue // default, or a form that names no addresses
		}
		if q.Overlaps(p) {
			return true
		}
	}
	return false
}

// listJSON runs ip -j with args and decodes its output into v. ip prints
// nothing at all for an empty list of namespaces.
func (n *network) listJSON(v any, args ...string) error {
	out, err := n.run("", nil, append([]string{"-j"}, args...)...)
	if err != nil {
		return err
	}
	if len(bytes.TrimSpace(out)) == 0 {
		return nil
	}
	if err := json.Unmarshal(out, v); err != nil {
		return fmt.Errorf("ip -j %s: %w", strings.Join(args, " "), err)
	}
	return nil
}

// batch runs cmds as one ip -batch in namespace ns (the root namespace if
// ns is empty), trying every command even after one fails.
func (n *network) batch(ns string, cmds []string) error {
	if len(cmds) == 0 {
		return nil
	}
	_, err := n.run(ns, []byte(strings.Join(cmds, "\n")+"\n"), "-force", "-batch", "-")
	return err
}

// ipError is a failed run of the ip command.
type ipError struct {
	args []string
	out  string
	err  error
}

func (e *ipError) Error() string {
	return fmt.Sprintf("ip %s: %v: %s", strings.Join(e.args, " "), e.err, strings.TrimSpace(e.out))
}

func (e *ipError) Unwrap() error { return e.err }

// denied reports whether the kernel refused the harness the privilege
// (no CAP_NET_ADMIN or CAP_SYS_ADMIN, as in an unprivileged container).
func (e *ipError) denied() bool {
	return strings.Contains(e.out, "Operation not permitted") || strings.Contains(e.out, "Permission denied")
}

// deniedAsUnsupported marks a refusal by the kernel as errNetnsUnsupported.
func deniedAsUnsupported(err error) error {
	var ipErr *ipError
	if errors.As(err, &ipErr) && ipErr.denied() {
		return fmt.Errorf("%w: %w", errNetnsUnsupported, err)
	}
	return err
}

// run runs ip with args in namespace ns (the root namespace if empty),
// with stdin as its input.
func (n *network) run(ns string, stdin []byte, args ...string) ([]byte, error) {
	if ns != "" {
		args = append([]string{"-n", ns}, args...)
	}
	ctx, cancel := context.WithTimeout(context.Background(), ipTimeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, n.ipPath, args...)
	if stdin != nil {
		cmd.Stdin = bytes.NewReader(stdin)
		args = append(args, "<<", strings.ReplaceAll(strings.TrimSpace(string(stdin)), "\n", "; "))
	}
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		return nil, &ipError{args: args, out: stderr.String() + stdout.String(), err: err}
	}
	return stdout.Bytes(), nil
}
