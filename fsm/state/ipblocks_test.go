package state

import (
	"errors"
	"fmt"
	"maps"
	"net/netip"
	"slices"
	"testing"

	"github.com/droverhq/drover/internal/mock"
	droverv1 "github.com/droverhq/drover/proto/drover/v1"
)

// An address is held from placement until its allocation is client-terminal,
// whatever the servers want; restore rebuilds the same view.
func TestAllocIPHeldUntilClientTerminal(t *testing.T) {
	f := newFixture(t)
	node := f.node()
	job := f.job(3)
	allocs := f.place(mock.Alloc(node, job, 1), mock.Alloc(node, job, 2))
	ip1, ip2 := allocs[0].GetResources().GetIp(), allocs[1].GetResources().GetIp()

	held := func(want1, want2 bool) {
		t.Helper()
		snap := f.s.Snapshot()
		if got := snap.AllocIPHeld(ip1); got != want1 {
			t.Errorf("AllocIPHeld(%s) = %v, want %v", ip1, got, want1)
		}
		if got := snap.AllocIPHeld(ip2); got != want2 {
			t.Errorf("AllocIPHeld(%s) = %v, want %v", ip2, got, want2)
		}
	}
	held(true, true)

	// Wanted stopped but still running on the node: still held.
	stop := &droverv1.PlanResultEntry{AppliedAt: 6, Stops: []*droverv1.AllocStop{{
		AllocId: allocs[0].GetId(), DesiredStatus: droverv1.AllocDesiredStatus_ALLOC_DESIRED_STATUS_STOP,
	}}}
	if _, err := f.s.UpsertPlanResults(f.next(), stop); err != nil {
		t.Fatal(err)
	}
	held(true, true)

	f.report(node.GetId(), droverv1.AllocClientStatus_ALLOC_CLIENT_STATUS_COMPLETE, allocs[0].GetId())
	held(false, true)

	// The next never-used address of the block skips the held one and
	// the released one.
	for _, ip := range []string{ip1, ip2} {
		from := netip.MustParseAddr(ip)
		if got, ok := f.s.Snapshot().NeverUsedIP(from, netip.MustParseAddr("10.0.0.255")); !ok || got == from {
			t.Errorf("NeverUsedIP(%s) = %s, %v; want another address", from, got, ok)
		}
	}

	restored := restoreCopy(t, f.s)
	if !restored.Snapshot().AllocIPHeld(ip2) || restored.Snapshot().AllocIPHeld(ip1) {
		t.Errorf("after restore: held(%s)=%v held(%s)=%v, want false, true", ip1, restored.Snapshot().AllocIPHeld(ip1), ip2, restored.Snapshot().AllocIPHeld(ip2))
	}
}

func TestIPBlockFirstNeverUsed(t *testing.T) {
	var b ipBlock
	for i := 0; i < 70; i++ {
		if i%2 == 0 {
			b.hold(uint8(i))
		} else {
			b.release(uint8(i), 7)
		}
	}
	tests := []struct {
		from uint8
		want uint8
		ok   bool
	}{{0, 70, true}, {63, 70, true}, {70, 70, true}, {200, 200, true}, {255, 255, true}}
	for _, tt := range tests {
		got, ok := b.firstNeverUsed(tt.from)
		if got != tt.want || ok != tt.ok {
			t.Errorf("firstNeverUsed(%d) = %d, %v; want %d, %v", tt.from, got, ok, tt.want, tt.ok)
		}
	}
	var full ipBlock
	full.held = [4]uint64{^uint64(0), ^uint64(0), ^uint64(0), ^uint64(0)}
	if _, ok := full.firstNeverUsed(0); ok {
		t.Error("firstNeverUsed on a full block found an address")
	}
	var nilBlock *ipBlock
	if got, ok := nilBlock.firstNeverUsed(9); !ok || got != 9 {
		t.Errorf("nil block firstNeverUsed(9) = %d, %v", got, ok)
	}
}

// restoreCopy rebuilds a new store from s's objects through a Restorer,
// the way a raft snapshot restore does.
func restoreCopy(t *testing.T, s *StateStore) *StateStore {
	t.Helper()
	out, err := NewStateStore()
	if err != nil {
		t.Fatal(err)
	}
	snap := s.Snapshot()
	r, err := out.Restore()
	if err != nil {
		t.Fatal(err)
	}
	for n := range snap.Nodes() {
		must(t, r.Node(n))
	}
	for j := range snap.Jobs() {
		must(t, r.Job(j))
	}
	for j := range snap.AllJobVersions() {
		must(t, r.JobVersion(j))
	}
	for e := range snap.Evals() {
		must(t, r.Eval(e))
	}
	for a := range snap.Allocs() {
		must(t, r.Alloc(a))
	}
	for b := range snap.IPBlockReleases() {
		must(t, r.IPBlockReleases(b))
	}
	for table, index := range snap.TableIndexes() {
		must(t, r.TableIndex(table, index))
	}
	r.Commit(snap.Index())
	return out
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

// ipAlloc is a mock allocation on node at the given address.
func ipAlloc(node *droverv1.Node, job *droverv1.Job, i int, ip string) *droverv1.Allocation {
	a := mock.Alloc(node, job, i)
	a.Resources.Ip = ip
	return a
}

// released lists ReleasedIPs as "addr@index".
func released(snap *Snapshot) []string {
	var out []string
	next := snap.ReleasedIPs()
	for addr, at, ok := next(); ok; addr, at, ok = next() {
		out = append(out, fmt.Sprintf("%s@%d", addr, at))
	}
	return out
}

// TestReleasedIPsOrder checks that released addresses come out by the raft
// index of their release, across blocks, those of one entry in address
// order; that an address held again leaves the list; and that the
// never-used search skips both held and released addresses.
func TestReleasedIPsOrder(t *testing.T) {
	f := newFixture(t)
	node := f.node()
	job := f.job(10)
	ips := []string{"10.0.1.5", "10.0.0.7", "10.0.1.2", "10.0.0.3", "10.0.2.9"}
	var allocs []*droverv1.Allocation
	for i, ip := range ips {
		allocs = append(allocs, ipAlloc(node, job, i, ip))
	}
	allocs = f.place(allocs...)
	// One entry releases 10.0.1.5 and 10.0.0.3, the next 10.0.0.7, a third
	// 10.0.2.9.
	f.report(node.GetId(), droverv1.AllocClientStatus_ALLOC_CLIENT_STATUS_COMPLETE, allocs[0].GetId(), allocs[3].GetId())
	i1 := f.index
	f.report(node.GetId(), droverv1.AllocClientStatus_ALLOC_CLIENT_STATUS_FAILED, allocs[1].GetId())
	i2 := f.index
	f.report(node.GetId(), droverv1.AllocClientStatus_ALLOC_CLIENT_STATUS_FAILED, allocs[4].GetId())
	i3 := f.index

	want := []string{
		fmt.Sprintf("10.0.0.3@%d", i1), fmt.Sprintf("10.0.1.5@%d", i1),
		fmt.Sprintf("10.0.0.7@%d", i2), fmt.Sprintf("10.0.2.9@%d", i3),
	}
	if got := released(f.s.Snapshot()); !slices.Equal(got, want) {
		t.Fatalf("released = %v, want %v", got, want)
	}

	// 10.0.0.3 is handed out again: it leaves the list; released again
	// later it goes to the back.
	again := f.place(ipAlloc(node, job, 9, "10.0.0.3"))[0]
	want = want[1:]
	if got := released(f.s.Snapshot()); !slices.Equal(got, want) {
		t.Fatalf("after reuse, released = %v, want %v", got, want)
	}
	f.report(node.GetId(), droverv1.AllocClientStatus_ALLOC_CLIENT_STATUS_COMPLETE, again.GetId())
	want = append(want, fmt.Sprintf("10.0.0.3@%d", f.index))
	if got := released(f.s.Snapshot()); !slices.Equal(got, want) {
		t.Fatalf("after release, released = %v, want %v", got, want)
	}

	snap := f.s.Snapshot()
	for ip, want := range map[string]uint64{"10.0.0.3": f.index, "10.0.0.7": i2, "10.0.1.2": 0, "10.0.0.4": 0, "bogus": 0} {
		if got := snap.IPReleasedAt(ip); got != want {
			t.Errorf("IPReleasedAt(%s) = %d, want %d", ip, got, want)
		}
	}
	for _, tc := range []struct{ from, want string }{
		{"10.0.0.3", "10.0.0.4"}, // released, not never-used
		{"10.0.0.7", "10.0.0.8"},
		{"10.0.1.2", "10.0.1.3"}, // held
		{"10.0.1.0", "10.0.1.0"},
	} {
		if got, ok := snap.NeverUsedIP(netip.MustParseAddr(tc.from), netip.MustParseAddr("10.255.255.255")); !ok || got.String() != tc.want {
			t.Errorf("NeverUsedIP(%s) = %s, %v; want %s", tc.from, got, ok, tc.want)
		}
	}
}

// TestIPBlockTransitions is a table of what holding and releasing do to
// one block's row.
func TestIPBlockTransitions(t *testing.T) {
	type step struct {
		hold bool
		off  uint8
		at   uint64
	}
	cases := []struct {
		name       string
		steps      []step
		held       []uint8
		freed      map[uint8]uint64
		oldest     uint64
		neverUsed0 uint8 // firstNeverUsed(0)
	}{
		{"held only", []step{{true, 0, 0}, {true, 1, 0}}, []uint8{0, 1}, nil, 0, 2},
		{"released", []step{{true, 0, 0}, {false, 0, 9}}, nil, map[uint8]uint64{0: 9}, 9, 1},
		{"released then held again", []step{{true, 0, 0}, {false, 0, 9}, {true, 0, 0}}, []uint8{0}, nil, 0, 1},
		{"released twice keeps the last", []step{{true, 3, 0}, {false, 3, 4}, {true, 3, 0}, {false, 3, 8}}, nil, map[uint8]uint64{3: 8}, 8, 0},
		{"oldest of several", []step{{true, 1, 0}, {true, 2, 0}, {false, 2, 5}, {false, 1, 7}}, nil, map[uint8]uint64{1: 7, 2: 5}, 5, 0},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			b := &ipBlock{}
			for _, s := range tc.steps {
				if s.hold {
					b.hold(s.off)
				} else {
					b.release(s.off, s.at)
				}
			}
			b.settle()
			for off := range 256 {
				o := uint8(off)
				if got, want := b.has(o), slices.Contains(tc.held, o); got != want {
					t.Errorf("held(%d) = %v, want %v", o, got, want)
				}
				at, want := tc.freed[o]
				if got := bit(&b.freed, o); got != want {
					t.Errorf("freed(%d) = %v, want %v", o, got, want)
				}
				if want && b.releasedAt[o] != at {
					t.Errorf("releasedAt(%d) = %d, want %d", o, b.releasedAt[o], at)
				}
			}
			if b.oldest != tc.oldest {
				t.Errorf("oldest = %d, want %d", b.oldest, tc.oldest)
			}
			if len(tc.freed) == 0 && b.releasedAt != nil {
				t.Error("releasedAt kept with nothing freed")
			}
			if got, ok := b.firstNeverUsed(0); !ok || got != tc.neverUsed0 {
				t.Errorf("firstNeverUsed(0) = %d, %v; want %d", got, ok, tc.neverUsed0)
			}
		})
	}
}

// TestIPReleasesOutliveGC checks that garbage collection of the
// allocations that held addresses keeps the order they were released in.
func TestIPReleasesOutliveGC(t *testing.T) {
	f := newFixture(t)
	node := f.node()
	job := f.job(2)
	allocs := f.place(ipAlloc(node, job, 0, "10.0.0.1"), ipAlloc(node, job, 1, "10.0.0.2"))
	f.report(node.GetId(), droverv1.AllocClientStatus_ALLOC_CLIENT_STATUS_COMPLETE, allocs[1].GetId())
	f.report(node.GetId(), droverv1.AllocClientStatus_ALLOC_CLIENT_STATUS_COMPLETE, allocs[0].GetId())
	before := released(f.s.Snapshot())
	stop := &droverv1.PlanResultEntry{AppliedAt: 6}
	for _, a := range allocs {
		stop.Stops = append(stop.Stops, &droverv1.AllocStop{AllocId: a.GetId(), DesiredStatus: droverv1.AllocDesiredStatus_ALLOC_DESIRED_STATUS_STOP})
	}
	if _, err := f.s.UpsertPlanResults(f.next(), stop); err != nil {
		t.Fatal(err)
	}
	res, _, err := f.s.ApplyGC(f.next(), &droverv1.GCEntry{AllocIds: ids(allocs)})
	if err != nil {
		t.Fatal(err)
	}
	if snap := f.s.Snapshot(); snap.AllocByID(allocs[0].GetId()) != nil || snap.AllocByID(allocs[1].GetId()) != nil {
		t.Fatalf("allocations not collected: %+v", res)
	}
	if after := released(f.s.Snapshot()); len(before) != 2 || !slices.Equal(after, before) {
		t.Fatalf("released after GC = %v, want %v", after, before)
	}
}

// TestIPReleasesRestore checks that the release history survives a
// restore exactly (same order, same digest), that an address a restored
// allocation holds stays held whatever the history says, and that a
// malformed record is refused.
func TestIPReleasesRestore(t *testing.T) {
	f := newFixture(t)
	node := f.node()
	job := f.job(300)
	var allocs []*droverv1.Allocation
	for i := range 300 {
		// Across two blocks.
		allocs = append(allocs, ipAlloc(node, job, i, fmt.Sprintf("10.0.%d.%d", i/200, i%200+1)))
	}
	allocs = f.place(allocs...)
	for i := 299; i >= 0; i -= 3 {
		f.report(node.GetId(), droverv1.AllocClientStatus_ALLOC_CLIENT_STATUS_COMPLETE, allocs[i].GetId())
	}
	snap := f.s.Snapshot()
	restored := restoreCopy(t, f.s)
	if got, want := released(restored.Snapshot()), released(snap); len(want) != 100 || !slices.Equal(got, want) {
		t.Fatalf("restored released = %v\nwant %v", got, want)
	}
	if got, want := digest(t, restored.Snapshot()), digest(t, snap); !maps.Equal(got, want) {
		t.Fatalf("restored digest %v, want %v", got, want)
	}
	for _, a := range allocs {
		if got, want := restored.Snapshot().AllocIPHeld(a.GetResources().GetIp()), snap.AllocIPHeld(a.GetResources().GetIp()); got != want {
			t.Fatalf("restored held(%s) = %v, want %v", a.GetResources().GetIp(), got, want)
		}
	}

	t.Run("held wins", func(t *testing.T) {
		out, err := NewStateStore()
		must(t, err)
		r, err := out.Restore()
		must(t, err)
		for n := range snap.Nodes() {
			must(t, r.Node(n))
		}
		for j := range snap.AllJobVersions() {
			must(t, r.JobVersion(j))
		}
		must(t, r.Job(snap.JobByID(job.GetId())))
		key, off, _ := ipBlockKey(allocs[1].GetResources().GetIp()) // held
		rec := &droverv1.IPBlockReleases{Block: []byte(key), ReleasedIndex: make([]uint64, int(off)+1)}
		rec.ReleasedIndex[off] = 3
		must(t, r.IPBlockReleases(rec))
		must(t, r.Alloc(snap.AllocByID(allocs[1].GetId())))
		r.Commit(snap.Index())
		if !out.Snapshot().AllocIPHeld(allocs[1].GetResources().GetIp()) || len(released(out.Snapshot())) != 0 {
			t.Fatalf("held address restored as released: %v", released(out.Snapshot()))
		}
	})

	t.Run("malformed", func(t *testing.T) {
		for name, rec := range map[string]*droverv1.IPBlockReleases{
			"short key":   {Block: []byte{10, 0, 0}},
			"not a block": {Block: append(make([]byte, 15), 7)},
			"too long":    {Block: make([]byte, 16), ReleasedIndex: make([]uint64, 257)},
		} {
			out, err := NewStateStore()
			must(t, err)
			r, err := out.Restore()
			must(t, err)
			if err := r.IPBlockReleases(rec); !errors.Is(err, ErrInvalidEntry) {
				t.Errorf("%s: err = %v, want ErrInvalidEntry", name, err)
			}
			r.Abort()
		}
	})
}

// TestDigestCoversIPReleases checks that two states with the same
// allocations but addresses released in another order have different
// digests: replicas that disagree on the order would hand out different
// addresses, and must be caught.
func TestDigestCoversIPReleases(t *testing.T) {
	build := func(order []int) map[string]string {
		f := newFixture(t)
		node, job := f.node(), f.job(2)
		allocs := f.place(ipAlloc(node, job, 0, "10.0.0.1"), ipAlloc(node, job, 1, "10.0.0.2"))
		for _, i := range order {
			f.report(node.GetId(), droverv1.AllocClientStatus_ALLOC_CLIENT_STATUS_COMPLETE, allocs[i].GetId())
		}
		return digest(t, f.s.Snapshot())
	}
	d01, d10 := build([]int{0, 1}), build([]int{1, 0})
	if d01[tableIPBlocks] == d10[tableIPBlocks] {
		t.Fatal("ip_blocks digest is the same for different release orders")
	}
	if again := build([]int{0, 1}); again[tableIPBlocks] != d01[tableIPBlocks] {
		t.Fatalf("ip_blocks digest of the same history differs: %s vs %s", again[tableIPBlocks], d01[tableIPBlocks])
	}
}

// markUsed writes, as one transaction at index, the addresses of each
// prefix as released there (used, not held), the way many allocations
// that came and went would leave them.
func markUsed(t *testing.T, s *StateStore, index uint64, prefixes ...string) {
	t.Helper()
	tx := newTxn(s.db.Load(), index)
	for _, p := range prefixes {
		prefix := netip.MustParsePrefix(p)
		for a := prefix.Addr(); prefix.Contains(a); a = a.Next() {
			key, off := addrBlockKey(a)
			tx.ipRowByKey(key).markFreed(off, index)
		}
	}
	tx.flushIPs()
	tx.db.Commit()
}

// TestNeverUsedIP checks the search for a never-used address across
// blocks and spans of 256 blocks, used up or not, within its bounds; and
// that a restore rebuilds what it skips by.
func TestNeverUsedIP(t *testing.T) {
	f := newFixture(t)
	markUsed(t, f.s, 1, "10.0.0.0/24", "10.0.1.0/29", "10.0.1.8/30", "10.1.0.0/16", "10.2.0.0/24", "fd00::/119")
	cases := []struct{ from, last, want string }{
		{"10.0.0.5", "10.0.255.255", "10.0.1.12"},
		{"10.0.1.12", "10.0.1.12", "10.0.1.12"},
		{"10.0.0.0", "10.0.1.11", ""},
		{"10.1.0.0", "10.3.0.0", "10.2.1.0"}, // a used-up span, then a used-up block
		{"10.1.200.7", "10.1.255.255", ""},
		{"10.0.255.255", "10.2.255.255", "10.0.255.255"},
		{"10.5.0.1", "10.5.0.1", "10.5.0.1"},
		{"fd00::17", "fd00::ffff", "fd00::200"},
		{"fd00::17", "fd00::1ff", ""},
	}
	check := func(t *testing.T, snap *Snapshot) {
		t.Helper()
		for _, tc := range cases {
			got, ok := snap.NeverUsedIP(netip.MustParseAddr(tc.from), netip.MustParseAddr(tc.last))
			if tc.want == "" {
				if ok {
					t.Errorf("NeverUsedIP(%s, %s) = %s, want none", tc.from, tc.last, got)
				}
				continue
			}
			if !ok || got.String() != tc.want {
				t.Errorf("NeverUsedIP(%s, %s) = %s, %v; want %s", tc.from, tc.last, got, ok, tc.want)
			}
		}
	}
	check(t, f.s.Snapshot())
	if n := len(slices.Collect(all[*ipSpan](f.s.Snapshot(), tableIPSpans, indexID))); n != 4 {
		t.Errorf("%d span rows, want 4: 10.0/16, 10.1/16, 10.2/16 and fd00::/112 have used-up blocks", n)
	}
	t.Run("after restore", func(t *testing.T) { check(t, restoreCopy(t, f.s).Snapshot()) })
}

// digest returns the snapshot's digests, failing the test on an error.
func digest(t *testing.T, snap *Snapshot) map[string]string {
	t.Helper()
	d, err := snap.Digest()
	if err != nil {
		t.Fatal(err)
	}
	return d
}
