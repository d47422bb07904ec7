package plan

import (
	"context"
	"net/netip"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/droverhq/drover/internal/invariant"
	"github.com/droverhq/drover/internal/mock"
	droverv1 "github.com/droverhq/drover/proto/drover/v1"
	"github.com/droverhq/drover/scheduler"
)

// addrPool is the network of the address tests: 6 usable addresses, .9 to
// .14.
var addrPool = netip.MustParsePrefix("10.7.0.8/29")

// ipAt returns a copy of a asking for ip.
func ipAt(a *droverv1.Allocation, ip string) *droverv1.Allocation {
	c := a.CloneVT()
	c.Resources.Ip = ip
	return c
}

// fill places allocations of job on n holding ips, and returns them.
func (f *fixture) fill(n *droverv1.Node, job *droverv1.Job, ips ...string) []*droverv1.Allocation {
	f.t.Helper()
	var allocs []*droverv1.Allocation
	for _, ip := range ips {
		allocs = append(allocs, ipAt(f.alloc(n, job, 10, 10), ip))
	}
	return f.place(allocs...)
}

// release reports each allocation complete, one entry each, in order.
func (f *fixture) release(allocs ...*droverv1.Allocation) {
	f.t.Helper()
	for _, a := range allocs {
		f.report(a.GetNodeId(), droverv1.AllocClientStatus_ALLOC_CLIENT_STATUS_COMPLETE, a.GetId())
	}
}

// addrCase is a plan checked against a state on addrPool. want holds the
// verdict on each node plan ("" for accepted, else part of the reason);
// ips the address each accepted placement may end up with (any of those
// listed), by its position in the plan's node plans.
type addrCase struct {
	name  string
	build func(f *fixture, j *droverv1.Job, ev *droverv1.Evaluation) (p *droverv1.Plan, inflight []*droverv1.Allocation)
	pool  netip.Prefix
	want  []string
	ips   [][]string
}

var addrCases = []addrCase{
	{
		name: "held in the state: a never-used one instead", pool: addrPool,
		build: func(f *fixture, j *droverv1.Job, ev *droverv1.Evaluation) (*droverv1.Plan, []*droverv1.Allocation) {
			n := f.node(ready)
			old := f.fill(n, j, "10.7.0.9", "10.7.0.10")
			f.release(old[1])
			return newPlan(ev, nodePlan(n, []*droverv1.Allocation{ipAt(f.alloc(n, j, 10, 10), "10.7.0.9")})), nil
		},
		want: []string{""},
		ips:  [][]string{{"10.7.0.11", "10.7.0.12", "10.7.0.13", "10.7.0.14"}},
	},
	{
		name: "none never used: the longest released", pool: addrPool,
		build: func(f *fixture, j *droverv1.Job, ev *droverv1.Evaluation) (*droverv1.Plan, []*droverv1.Allocation) {
			n := f.node(ready)
			all := f.fill(n, j, "10.7.0.9", "10.7.0.10", "10.7.0.11", "10.7.0.12", "10.7.0.13", "10.7.0.14")
			f.release(all[4], all[1], all[2])
			return newPlan(ev, nodePlan(n, []*droverv1.Allocation{
				ipAt(f.alloc(n, j, 10, 10), "10.7.0.9"), ipAt(f.alloc(n, j, 10, 10), "10.7.0.9"),
			})), nil
		},
		want: []string{""},
		ips:  [][]string{{"10.7.0.13"}, {"10.7.0.10"}},
	},
	{
		name: "released again since the plan was made: the longest released", pool: addrPool,
		build: func(f *fixture, j *droverv1.Job, ev *droverv1.Evaluation) (*droverv1.Plan, []*droverv1.Allocation) {
			n := f.node(ready)
			all := f.fill(n, j, "10.7.0.9", "10.7.0.10", "10.7.0.11", "10.7.0.12", "10.7.0.13", "10.7.0.14")
			f.release(all[2], all[4])
			// The scheduler saw .11 as the longest released and picked it;
			// another plan took it and its allocation ended meanwhile.
			p := newPlan(ev, nodePlan(n, []*droverv1.Allocation{ipAt(f.alloc(n, j, 10, 10), "10.7.0.11")}))
			p.SnapshotIndex = f.st.Snapshot().Index()
			f.release(f.fill(n, j, "10.7.0.11")...)
			return p, nil
		},
		want: []string{""},
		ips:  [][]string{{"10.7.0.13"}},
	},
	{
		name: "held by the plan in flight", pool: addrPool,
		build: func(f *fixture, j *droverv1.Job, ev *droverv1.Evaluation) (*droverv1.Plan, []*droverv1.Allocation) {
			n := f.node(ready)
			f.fill(n, j, "10.7.0.9", "10.7.0.11", "10.7.0.12")
			inflight := []*droverv1.Allocation{ipAt(f.alloc(n, j, 10, 10), "10.7.0.10"), ipAt(f.alloc(n, j, 10, 10), "10.7.0.13")}
			return newPlan(ev, nodePlan(n, []*droverv1.Allocation{ipAt(f.alloc(n, j, 10, 10), "10.7.0.10")})), inflight
		},
		want: []string{""},
		ips:  [][]string{{"10.7.0.14"}},
	},
	{
		name: "full once the plan in flight is counted", pool: addrPool,
		build: func(f *fixture, j *droverv1.Job, ev *droverv1.Evaluation) (*droverv1.Plan, []*droverv1.Allocation) {
			n := f.node(ready)
			f.fill(n, j, "10.7.0.9", "10.7.0.11", "10.7.0.12", "10.7.0.13", "10.7.0.14")
			inflight := ipAt(f.alloc(n, j, 10, 10), "10.7.0.10")
			return newPlan(ev, nodePlan(n, []*droverv1.Allocation{ipAt(f.alloc(n, j, 10, 10), "10.7.0.10")})), []*droverv1.Allocation{inflight}
		},
		want: []string{"already held by allocation"},
	},
	{
		name: "held by an earlier node of the plan", pool: addrPool,
		build: func(f *fixture, j *droverv1.Job, ev *droverv1.Evaluation) (*droverv1.Plan, []*droverv1.Allocation) {
			n1, n2 := f.node(ready), f.node(ready)
			f.fill(n1, j, "10.7.0.11", "10.7.0.12", "10.7.0.13")
			return newPlan(ev,
				nodePlan(n1, []*droverv1.Allocation{ipAt(f.alloc(n1, j, 10, 10), "10.7.0.9")}),
				nodePlan(n2, []*droverv1.Allocation{ipAt(f.alloc(n2, j, 10, 10), "10.7.0.9")})), nil
		},
		want: []string{"", ""},
		ips:  [][]string{{"10.7.0.9"}, {"10.7.0.10", "10.7.0.14"}},
	},
	{
		name: "a replacement leaves what a later node asks for", pool: addrPool,
		build: func(f *fixture, j *droverv1.Job, ev *droverv1.Evaluation) (*droverv1.Plan, []*droverv1.Allocation) {
			n1, n2 := f.node(ready), f.node(ready)
			f.fill(n1, j, "10.7.0.9", "10.7.0.11", "10.7.0.12", "10.7.0.13", "10.7.0.14")
			return newPlan(ev,
				nodePlan(n1, []*droverv1.Allocation{ipAt(f.alloc(n1, j, 10, 10), "10.7.0.9")}),
				nodePlan(n2, []*droverv1.Allocation{ipAt(f.alloc(n2, j, 10, 10), "10.7.0.10")})), nil
		},
		want: []string{"already held by another allocation", ""},
		ips:  [][]string{nil, {"10.7.0.10"}},
	},
	{
		name: "two placements of one node ask for one address", pool: addrPool,
		build: func(f *fixture, j *droverv1.Job, ev *droverv1.Evaluation) (*droverv1.Plan, []*droverv1.Allocation) {
			n := f.node(ready)
			f.fill(n, j, "10.7.0.9", "10.7.0.10", "10.7.0.11", "10.7.0.13")
			return newPlan(ev, nodePlan(n, []*droverv1.Allocation{
				ipAt(f.alloc(n, j, 10, 10), "10.7.0.12"), ipAt(f.alloc(n, j, 10, 10), "10.7.0.12"),
			})), nil
		},
		want: []string{""},
		ips:  [][]string{{"10.7.0.12"}, {"10.7.0.14"}},
	},
	{
		name: "an existing allocation keeps its address or is refused", pool: addrPool,
		build: func(f *fixture, j *droverv1.Job, ev *droverv1.Evaluation) (*droverv1.Plan, []*droverv1.Allocation) {
			n := f.node(ready)
			held := f.fill(n, j, "10.7.0.9", "10.7.0.10")
			return newPlan(ev, nodePlan(n, []*droverv1.Allocation{ipAt(held[1], "10.7.0.9")})), nil
		},
		want: []string{"already held"},
	},
	{
		name: "network full", pool: addrPool,
		build: func(f *fixture, j *droverv1.Job, ev *droverv1.Evaluation) (*droverv1.Plan, []*droverv1.Allocation) {
			n := f.node(ready)
			f.fill(n, j, "10.7.0.9", "10.7.0.10", "10.7.0.11", "10.7.0.12", "10.7.0.13", "10.7.0.14")
			return newPlan(ev, nodePlan(n, []*droverv1.Allocation{ipAt(f.alloc(n, j, 10, 10), "10.7.0.9")})), nil
		},
		want: []string{"already held by another allocation"},
	},
	{
		name: "no network configured",
		build: func(f *fixture, j *droverv1.Job, ev *droverv1.Evaluation) (*droverv1.Plan, []*droverv1.Allocation) {
			n := f.node(ready)
			f.fill(n, j, "10.7.0.9")
			return newPlan(ev, nodePlan(n, []*droverv1.Allocation{ipAt(f.alloc(n, j, 10, 10), "10.7.0.9")})), nil
		},
		want: []string{"already held by another allocation"},
	},
}

// TestVerifyPlanReplacesTakenAddresses checks that a new placement whose
// address is no longer free gets the one the scheduler would pick on the
// newest state, never one held, in flight, asked for elsewhere in the plan
// or outside the network; and that the plan itself is left as it was.
func TestVerifyPlanReplacesTakenAddresses(t *testing.T) {
	for _, mode := range cacheModes {
		for _, tc := range addrCases {
			t.Run(mode.name+"/"+tc.name, func(t *testing.T) {
				f := newFixture(t)
				j, ev := f.job()
				p, inflight := tc.build(f, j, ev)
				orig := p.CloneVT()
				var ov *overlay
				if inflight != nil {
					ov = newOverlay()
					ov.add(inflight)
				}
				ver := verifyPlan(f.st.Snapshot(), p, ov, tc.pool, f.cache(mode.cached))
				if !p.EqualVT(orig) {
					t.Fatal("verification changed the plan it was given")
				}
				accepted := map[string]*droverv1.NodePlan{}
				for _, np := range ver.accepted {
					accepted[np.GetNodeId()] = np
				}
				pos := 0
				for i, np := range p.GetNodePlans() {
					got := accepted[np.GetNodeId()]
					if tc.want[i] != "" {
						if got != nil {
							t.Fatalf("node plan %d accepted, want rejected with %q", i, tc.want[i])
						}
						r := slices.IndexFunc(ver.rejected, func(r rejection) bool { return r.nodeID == np.GetNodeId() })
						if r < 0 || !strings.Contains(ver.rejected[r].reason, tc.want[i]) {
							t.Fatalf("node plan %d: rejections %+v, want %q", i, ver.rejected, tc.want[i])
						}
						pos += len(np.GetAllocations())
						continue
					}
					if got == nil {
						t.Fatalf("node plan %d rejected: %+v", i, ver.rejected)
					}
					for k, a := range got.GetAllocations() {
						if a.GetId() != np.GetAllocations()[k].GetId() {
							t.Fatalf("node plan %d: allocation %d is %s, want %s", i, k, a.GetId(), np.GetAllocations()[k].GetId())
						}
						if allowed := tc.ips[pos]; !slices.Contains(allowed, a.GetResources().GetIp()) {
							t.Errorf("node plan %d allocation %d: address %s, want one of %v", i, k, a.GetResources().GetIp(), allowed)
						}
						pos++
					}
				}
			})
		}
	}
}

// schedPlanner is the scheduler's Planner over the test's applier: plans
// go through the queue, evaluations straight to the store. Its first
// SubmitPlan waits until every planner sharing start has built its plan,
// so that the plans are made on the same state and applied after.
type schedPlanner struct {
	h     *harness
	start *sync.WaitGroup
	once  sync.Once
}

func (p *schedPlanner) SubmitPlan(ctx context.Context, plan *droverv1.Plan) (*droverv1.PlanResult, scheduler.State, error) {
	p.once.Do(func() {
		p.start.Done()
		p.start.Wait()
	})
	res, err := p.h.submit(plan).Wait(ctx)
	if err != nil || res.GetRefreshIndex() == 0 {
		return res, nil, err
	}
	snap, err := p.h.st.SnapshotMinIndex(ctx, res.GetRefreshIndex())
	return res, snap, err
}

func (p *schedPlanner) UpdateEval(_ context.Context, ev *droverv1.Evaluation) error {
	return p.writeEval(ev)
}
func (p *schedPlanner) CreateEval(_ context.Context, ev *droverv1.Evaluation) error {
	return p.writeEval(ev)
}
func (p *schedPlanner) ReblockEval(_ context.Context, ev *droverv1.Evaluation) error {
	return p.writeEval(ev)
}

func (p *schedPlanner) writeEval(ev *droverv1.Evaluation) error {
	_, err := p.h.write(func(i uint64) error {
		_, err := p.h.st.UpsertEvals(i, &droverv1.EvalUpdateEntry{Evals: []*droverv1.Evaluation{ev.CloneVT()}})
		return err
	})
	return err
}

// TestConcurrentPlansSamePool runs two schedulers at once on the same
// state, placing two jobs from the same network, and applies their plans
// through the applier. With the same seed they want the very same
// addresses (the worst case: strict order among released addresses makes
// every concurrent pass want the oldest). Both plans must be committed
// whole, no address held twice, and between them the placements must have
// the never-used addresses, or once those are gone, the longest released,
// in order.
func TestConcurrentPlansSamePool(t *testing.T) {
	for _, tc := range []struct {
		name    string
		network string
		// used addresses are placed and released in the order given.
		used []string
	}{
		{"never used", "10.8.0.0/24", nil},
		{"released only", "10.8.0.0/28", []string{
			"10.8.0.7", "10.8.0.3", "10.8.0.12", "10.8.0.1", "10.8.0.14", "10.8.0.9", "10.8.0.2",
			"10.8.0.4", "10.8.0.5", "10.8.0.6", "10.8.0.8", "10.8.0.10", "10.8.0.11", "10.8.0.13",
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newFixture(t)
			pool := netip.MustParsePrefix(tc.network)
			h := newHarness(t, f, &fakeRaft{}, func(c *Config) { c.AllocCIDR = pool })
			n := f.node(ready)
			if len(tc.used) > 0 {
				filler, _ := f.job()
				f.release(f.fill(n, filler, tc.used...)...)
			}
			var evals []*droverv1.Evaluation
			for range 2 {
				evals = append(evals, f.register(smallJob(4)))
			}
			snap := f.st.Snapshot()
			var start, done sync.WaitGroup
			start.Add(len(evals))
			errs := make([]error, len(evals))
			for i, ev := range evals {
				s, err := scheduler.New(ev.GetType(), snap, &schedPlanner{h: h, start: &start},
					scheduler.Config{AllocCIDR: pool, Seed: 7, Now: func() int64 { return now }})
				if err != nil {
					t.Fatal(err)
				}
				done.Add(1)
				go func() {
					defer done.Done()
					ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
					defer cancel()
					errs[i] = s.Process(ctx, ev)
				}()
			}
			done.Wait()
			for i, err := range errs {
				if err != nil {
					t.Fatalf("scheduler %d: %v", i, err)
				}
			}
			stats := h.applier.Stats()
			if stats.NodesRejected != 0 || stats.Applied != 2 {
				t.Fatalf("applier %+v, want 2 plans applied and no node rejected", stats)
			}
			if stats.AddressesReplaced != 4 {
				t.Errorf("%d addresses replaced, want 4: both plans asked for the same", stats.AddressesReplaced)
			}
			final := f.st.Snapshot()
			for _, err := range invariant.Check(final) {
				t.Error(err)
			}
			var got []string
			for _, ev := range evals {
				allocs, _ := final.AllocsByJob(ev.GetJobId())
				if len(allocs) != 4 {
					t.Fatalf("job %s has %d allocations, want 4", ev.GetJobId(), len(allocs))
				}
				for _, a := range allocs {
					got = append(got, a.GetResources().GetIp())
				}
			}
			if len(tc.used) > 0 {
				slices.SortFunc(got, func(x, y string) int { return slices.Index(tc.used, x) - slices.Index(tc.used, y) })
				if want := tc.used[:8]; !slices.Equal(got, want) {
					t.Fatalf("addresses %v, want the 8 longest released %v", got, want)
				}
			}
			for _, ip := range got {
				if !pool.Contains(netip.MustParseAddr(ip)) {
					t.Fatalf("address %s outside %s", ip, pool)
				}
			}
		})
	}
}

// smallJob is a job of count small allocations that asks for no port, so
// that only addresses can collide.
func smallJob(count int32) *droverv1.Job {
	j := mock.Job(count)
	j.TaskGroups[0].Resources = &droverv1.Resources{CpuMhz: 10, MemoryMb: 10}
	j.Canonicalize()
	return j
}

// register stores a job with its pending evaluation and returns the
// evaluation as stored.
func (f *fixture) register(j *droverv1.Job) *droverv1.Evaluation {
	f.t.Helper()
	ev := mock.Eval(j, droverv1.EvalTrigger_EVAL_TRIGGER_JOB_REGISTER)
	f.mustWrite("register job", func(i uint64) error {
		_, _, err := f.st.UpsertJob(i, &droverv1.JobRegisterEntry{Job: j.CloneVT(), Eval: ev.CloneVT(), SubmittedAt: 3})
		return err
	})
	return f.st.Snapshot().EvalByID(ev.GetId())
}
