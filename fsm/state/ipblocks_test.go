package state

import (
	"net/netip"
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

	// The next free address of the block skips the held one.
	from := netip.MustParseAddr(ip2)
	if got, ok := f.s.Snapshot().FreeIPInBlock(from); !ok || got == from {
		t.Errorf("FreeIPInBlock(%s) = %s, %v; want another address", from, got, ok)
	}
	if got, ok := f.s.Snapshot().FreeIPInBlock(netip.MustParseAddr(ip1)); !ok || got.String() != ip1 {
		t.Errorf("FreeIPInBlock(%s) = %s, %v; want the released address itself", ip1, got, ok)
	}

	restored := restoreCopy(t, f.s)
	if !restored.Snapshot().AllocIPHeld(ip2) || restored.Snapshot().AllocIPHeld(ip1) {
		t.Errorf("after restore: held(%s)=%v held(%s)=%v, want false, true", ip1, restored.Snapshot().AllocIPHeld(ip1), ip2, restored.Snapshot().AllocIPHeld(ip2))
	}
}

func TestIPBlockFirstFree(t *testing.T) {
	var b ipBlock
	for i := 0; i < 70; i++ {
		b.held[i/64] |= 1 << (i % 64)
	}
	tests := []struct {
		from uint8
		want uint8
		ok   bool
	}{{0, 70, true}, {63, 70, true}, {70, 70, true}, {200, 200, true}, {255, 255, true}}
	for _, tt := range tests {
		got, ok := b.firstFree(tt.from)
		if got != tt.want || ok != tt.ok {
			t.Errorf("firstFree(%d) = %d, %v; want %d, %v", tt.from, got, ok, tt.want, tt.ok)
		}
	}
	var full ipBlock
	full.held = [4]uint64{^uint64(0), ^uint64(0), ^uint64(0), ^uint64(0)}
	if _, ok := full.firstFree(0); ok {
		t.Error("firstFree on a full block found an address")
	}
	var nilBlock *ipBlock
	if got, ok := nilBlock.firstFree(9); !ok || got != 9 {
		t.Errorf("nil block firstFree(9) = %d, %v", got, ok)
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
	r.Commit(snap.Index())
	return out
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}
