package cluster

import (
	"errors"
	"fmt"
	"maps"
	"net/netip"
	"slices"
	"strconv"
)

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
