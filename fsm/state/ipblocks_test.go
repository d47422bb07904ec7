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

	// The next never-used address of the block skips the held one and
	// the released one.
	for _, ip := range []string{ip1, ip2} {
		from := netip.MustParseAddr(ip)
		if got, ok := f.s.Snapshot().NeverUsedIPInBlock(from); !ok || got == from {
			t.Errorf("NeverUsedIPInBlock(%s) = %s, %v; want another address", from, got, ok)
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
	r.Commit(snap.Index())
	return out
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}
