package gc

import (
	"reflect"
	"slices"
	"testing"

	droverv1 "github.com/droverhq/drover/proto/drover/v1"
)

const (
	service = droverv1.JobType_JOB_TYPE_SERVICE
	batch   = droverv1.JobType_JOB_TYPE_BATCH

	running  = droverv1.AllocClientStatus_ALLOC_CLIENT_STATUS_RUNNING
	complete = droverv1.AllocClientStatus_ALLOC_CLIENT_STATUS_COMPLETE
	failed   = droverv1.AllocClientStatus_ALLOC_CLIENT_STATUS_FAILED

	ready        = droverv1.NodeStatus_NODE_STATUS_READY
	down         = droverv1.NodeStatus_NODE_STATUS_DOWN
	disconnected = droverv1.NodeStatus_NODE_STATUS_DISCONNECTED

	evalPending  = droverv1.EvalStatus_EVAL_STATUS_PENDING
	evalBlocked  = droverv1.EvalStatus_EVAL_STATUS_BLOCKED
	evalComplete = droverv1.EvalStatus_EVAL_STATUS_COMPLETE
	evalFailed   = droverv1.EvalStatus_EVAL_STATUS_FAILED
	evalCanceled = droverv1.EvalStatus_EVAL_STATUS_CANCELED
)

// planCase builds a state and says exactly what the default thresholds
// collect from it; everything else it built must stay.
type planCase struct {
	name  string
	build func(f *fixture) collected
}

func runPlanCases(t *testing.T, th Thresholds, cases []planCase) {
	t.Helper()
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			f := newFixture(t)
			want := tc.build(f).sorted()
			snap := f.s.Snapshot()
			entries := Plan(snap, th, now, DefaultBatchSize)
			if got := flatten(entries); !reflect.DeepEqual(got, want) {
				t.Errorf("collected\n got %+v\nwant %+v", got, want)
			}
			checkSafeOrder(t, snap, entries, DefaultBatchSize)
		})
	}
}

// readyNode registers a node and makes it ready.
func readyNode(f *fixture) *droverv1.Node {
	n := f.node()
	f.nodeStatus(n.GetId(), ready, ago(old))
	return n
}

func TestPlanAllocations(t *testing.T) {
	runPlanCases(t, DefaultThresholds(), []planCase{
		{"stopped and complete, old: collected", func(f *fixture) collected {
			n, j := readyNode(f), f.job(service, ago(old))
			a := f.alloc(n, j, nil, ago(old))
			f.report(ago(old), complete, a)
			f.stop(ago(old), false, a)
			return collected{Allocs: idsOf(a)}
		}},
		{"stopped and complete, fresh: kept", func(f *fixture) collected {
			n, j := readyNode(f), f.job(service, ago(old))
			a := f.alloc(n, j, nil, ago(old))
			f.report(ago(fresh), complete, a)
			f.stop(ago(fresh), false, a)
			return collected{}
		}},
		{"stopped but still running: kept", func(f *fixture) collected {
			n, j := readyNode(f), f.job(service, ago(old))
			a := f.alloc(n, j, nil, ago(old))
			f.report(ago(old), running, a)
			f.stop(ago(old), false, a)
			return collected{}
		}},
		{"stopped, unknown on a disconnected node: kept", func(f *fixture) collected {
			n, j := readyNode(f), f.job(service, ago(old))
			a := f.alloc(n, j, nil, ago(old), func(a *droverv1.Allocation) {
				a.ClientStatus = droverv1.AllocClientStatus_ALLOC_CLIENT_STATUS_UNKNOWN
			})
			f.stop(ago(old), false, a)
			f.nodeStatus(n.GetId(), disconnected, ago(old))
			return collected{}
		}},
		{"stopped and lost: collected", func(f *fixture) collected {
			n, j := readyNode(f), f.job(service, ago(old))
			a := f.alloc(n, j, nil, ago(old))
			f.stop(ago(old), true, a)
			return collected{Allocs: idsOf(a)}
		}},
		{"lost, not yet stopped by the scheduler: kept", func(f *fixture) collected {
			n, j := readyNode(f), f.job(service, ago(old))
			f.alloc(n, j, nil, ago(old), func(a *droverv1.Allocation) {
				a.ClientStatus = droverv1.AllocClientStatus_ALLOC_CLIENT_STATUS_LOST
			})
			return collected{}
		}},
		{"failed, waiting to be rescheduled: kept", func(f *fixture) collected {
			n, j := readyNode(f), f.job(service, ago(old))
			a := f.alloc(n, j, nil, ago(old))
			f.report(ago(old), failed, a)
			return collected{}
		}},
		{"failed and replaced: collected, replacement kept", func(f *fixture) collected {
			n, j := readyNode(f), f.job(service, ago(old))
			a := f.alloc(n, j, nil, ago(old))
			f.report(ago(old), failed, a)
			f.alloc(n, j, nil, ago(old), func(r *droverv1.Allocation) { r.PreviousAllocation = a.GetId() })
			return collected{Allocs: idsOf(a)}
		}},
		{"service allocation that exited: collected", func(f *fixture) collected {
			n, j := readyNode(f), f.job(service, ago(old))
			a := f.alloc(n, j, nil, ago(old))
			f.report(ago(old), complete, a)
			return collected{Allocs: idsOf(a)}
		}},
		{"complete batch work of a live batch job, even stopped: kept", func(f *fixture) collected {
			n, j := readyNode(f), f.job(batch, ago(old))
			done := f.alloc(n, j, nil, ago(old))
			stopped := f.alloc(n, j, nil, ago(old))
			f.alloc(n, j, nil, ago(old)) // still pending: the job is not dead
			f.report(ago(old), complete, done, stopped)
			f.stop(ago(old), false, stopped)
			return collected{}
		}},
		{"stopped failed batch allocation: kept until the batch threshold", func(f *fixture) collected {
			n, j := readyNode(f), f.job(batch, ago(old))
			young := f.alloc(n, j, nil, ago(old))
			aged := f.alloc(n, j, nil, ago(old))
			f.alloc(n, j, nil, ago(old)) // still pending: the job is not dead
			f.report(ago(old), failed, young, aged)
			f.stop(ago(mid), false, young)
			f.stop(ago(old), false, aged)
			return collected{Allocs: idsOf(aged)}
		}},
		{"stopped failed service allocation past the eval threshold: collected", func(f *fixture) collected {
			n, j := readyNode(f), f.job(service, ago(old))
			a := f.alloc(n, j, nil, ago(old))
			f.report(ago(old), failed, a)
			f.stop(ago(mid), false, a)
			return collected{Allocs: idsOf(a)}
		}},
		{"failed allocation of a stopped job that stays: collected", func(f *fixture) collected {
			n, j := readyNode(f), f.job(service, ago(old))
			a := f.alloc(n, j, nil, ago(old))
			f.alloc(n, j, nil, ago(old)) // keeps the job: not client-terminal
			f.report(ago(old), failed, a)
			f.stopJob(j, ago(old))
			return collected{Allocs: idsOf(a)}
		}},
	})
}

func TestPlanEvaluations(t *testing.T) {
	runPlanCases(t, DefaultThresholds(), []planCase{
		{"finished, old, nothing refers to it: collected", func(f *fixture) collected {
			j := f.job(service, ago(old))
			c := f.eval(j, evalComplete, ago(old))
			fl := f.eval(j, evalFailed, ago(old))
			ca := f.eval(j, evalCanceled, ago(old))
			return collected{Evals: idsOf(c, fl, ca)}
		}},
		{"pending or blocked: kept", func(f *fixture) collected {
			j := f.job(service, ago(old))
			f.eval(j, evalPending, ago(old))
			f.eval(j, evalBlocked, ago(old))
			return collected{}
		}},
		{"fresh: kept", func(f *fixture) collected {
			j := f.job(service, ago(old))
			f.eval(j, evalComplete, ago(fresh))
			return collected{}
		}},
		{"batch job: kept until the batch threshold", func(f *fixture) collected {
			j := f.job(batch, ago(old))
			f.eval(j, evalComplete, ago(mid))
			aged := f.eval(j, evalComplete, ago(old))
			return collected{Evals: idsOf(aged)}
		}},
		{"placed a running allocation: kept", func(f *fixture) collected {
			n, j := readyNode(f), f.job(service, ago(old))
			ev := f.eval(j, evalComplete, ago(old))
			f.report(ago(old), running, f.alloc(n, j, ev, ago(old)))
			return collected{}
		}},
		{"its allocations are collected: collected with them", func(f *fixture) collected {
			n, j := readyNode(f), f.job(service, ago(old))
			ev := f.eval(j, evalComplete, ago(old))
			a := f.alloc(n, j, ev, ago(old))
			f.report(ago(old), complete, a)
			f.stop(ago(old), false, a)
			return collected{Allocs: idsOf(a), Evals: idsOf(ev)}
		}},
		{"one of its allocations stays: kept", func(f *fixture) collected {
			n, j := readyNode(f), f.job(service, ago(old))
			ev := f.eval(j, evalComplete, ago(old))
			a := f.alloc(n, j, ev, ago(old))
			f.alloc(n, j, ev, ago(old))
			f.report(ago(old), complete, a)
			f.stop(ago(old), false, a)
			return collected{Allocs: idsOf(a)}
		}},
		{"follow-up of an allocation that stays: kept", func(f *fixture) collected {
			n, j := readyNode(f), f.job(service, ago(old))
			followup := f.eval(j, evalComplete, ago(old))
			a := f.alloc(n, j, nil, ago(old), func(a *droverv1.Allocation) { a.FollowupEvalId = followup.GetId() })
			f.report(ago(old), failed, a)
			return collected{}
		}},
	})
}

func TestPlanNodes(t *testing.T) {
	runPlanCases(t, DefaultThresholds(), []planCase{
		{"down long ago, allocations lost: collected with them whatever their age", func(f *fixture) collected {
			n, j := readyNode(f), f.job(service, ago(old))
			a := f.alloc(n, j, nil, ago(old))
			f.report(ago(old), running, a)
			f.nodeStatus(n.GetId(), down, ago(old))
			f.stop(ago(fresh), true, a)
			return collected{Nodes: idsOf(n), Allocs: idsOf(a)}
		}},
		{"down long ago, an allocation not yet handled: kept", func(f *fixture) collected {
			n, j := readyNode(f), f.job(service, ago(old))
			f.report(ago(old), running, f.alloc(n, j, nil, ago(old)))
			f.nodeStatus(n.GetId(), down, ago(old))
			return collected{}
		}},
		{"down long ago, an allocation stopped but not client-terminal: collected, allocation stays", func(f *fixture) collected {
			n, j := readyNode(f), f.job(service, ago(old))
			a := f.alloc(n, j, nil, ago(old))
			f.report(ago(old), running, a)
			f.stop(ago(old), false, a)
			f.nodeStatus(n.GetId(), down, ago(old))
			return collected{Nodes: idsOf(n)}
		}},
		{"down long ago, finished batch work of a live job: collected, work stays", func(f *fixture) collected {
			n, j := readyNode(f), f.job(batch, ago(old))
			other := readyNode(f)
			done := f.alloc(n, j, nil, ago(old))
			f.alloc(other, j, nil, ago(old)) // still pending: the job is not dead
			f.report(ago(old), complete, done)
			f.nodeStatus(n.GetId(), down, ago(old))
			return collected{Nodes: idsOf(n)}
		}},
		{"down recently: kept", func(f *fixture) collected {
			n := readyNode(f)
			f.nodeStatus(n.GetId(), down, ago(fresh))
			return collected{}
		}},
		{"disconnected long ago: kept", func(f *fixture) collected {
			n := readyNode(f)
			f.nodeStatus(n.GetId(), disconnected, ago(old))
			return collected{}
		}},
		{"ready: kept", func(f *fixture) collected {
			readyNode(f)
			return collected{}
		}},
	})
}

func TestPlanJobs(t *testing.T) {
	runPlanCases(t, DefaultThresholds(), []planCase{
		{"stopped long ago, all done: collected with allocations and evaluations", func(f *fixture) collected {
			n, j := readyNode(f), f.job(service, ago(old))
			a := f.alloc(n, j, nil, ago(old))
			f.stopJob(j, ago(old))
			f.report(ago(fresh), complete, a)
			f.stop(ago(fresh), false, a)
			f.finishEvals(j, ago(fresh))
			evals := idsOf(slices.Collect(f.s.Snapshot().EvalsByJob(j.GetId()))...)
			return collected{Jobs: idsOf(j), Allocs: idsOf(a), Evals: evals}
		}},
		{"stopped long ago, an allocation still running: kept", func(f *fixture) collected {
			n, j := readyNode(f), f.job(service, ago(old))
			a := f.alloc(n, j, nil, ago(old))
			f.stopJob(j, ago(old))
			f.report(ago(old), running, a)
			f.stop(ago(old), false, a)
			f.finishEvals(j, ago(old))
			// The finished evaluations go on their own; the job stays.
			return collected{Evals: idsOf(slices.Collect(f.s.Snapshot().EvalsByJob(j.GetId()))...)}
		}},
		{"stopped long ago, an evaluation pending: kept", func(f *fixture) collected {
			j := f.job(service, ago(old))
			f.stopJob(j, ago(old))
			f.finishEvals(j, ago(old))
			finished := idsOf(slices.Collect(f.s.Snapshot().EvalsByJob(j.GetId()))...)
			f.eval(j, evalPending, ago(old))
			return collected{Evals: finished}
		}},
		{"stopped recently: kept", func(f *fixture) collected {
			j := f.job(service, ago(old))
			f.stopJob(j, ago(fresh))
			f.finishEvals(j, ago(fresh))
			return collected{}
		}},
		{"batch job dead long ago: collected with its finished work", func(f *fixture) collected {
			n, j := readyNode(f), f.job(batch, ago(old))
			a := f.alloc(n, j, nil, ago(old))
			f.report(ago(fresh), complete, a)
			f.finishEvals(j, ago(fresh))
			if got := f.s.Snapshot().JobByID(j.GetId()).GetStatus(); got != droverv1.JobStatus_JOB_STATUS_DEAD {
				t.Fatalf("batch job status %s, want dead", got)
			}
			evals := idsOf(slices.Collect(f.s.Snapshot().EvalsByJob(j.GetId()))...)
			return collected{Jobs: idsOf(j), Allocs: idsOf(a), Evals: evals}
		}},
		{"batch job dead, submitted recently: kept", func(f *fixture) collected {
			n, j := readyNode(f), f.job(batch, ago(mid))
			f.report(ago(mid), complete, f.alloc(n, j, nil, ago(mid)))
			f.finishEvals(j, ago(fresh))
			return collected{}
		}},
		{"service job with nothing running: kept", func(f *fixture) collected {
			n, j := readyNode(f), f.job(service, ago(old))
			f.report(ago(old), failed, f.alloc(n, j, nil, ago(old)))
			f.finishEvals(j, ago(fresh))
			return collected{}
		}},
	})
}
