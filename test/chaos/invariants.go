package chaos

import (
	"context"
	"fmt"
	"time"

	"github.com/droverhq/drover/fsm/state"
	"github.com/droverhq/drover/internal/invariant"
	droverv1 "github.com/droverhq/drover/proto/drover/v1"
	"github.com/droverhq/drover/test/cluster"
)

// checkInvariants rebuilds each server's nodes, jobs and allocations from
// its own state (stale reads, after convergence) and checks drover's
// placement invariants on them: no node over capacity, no port or address
// held twice, no group over its count. It returns the violations and how
// many allocations the last server holds.
func checkInvariants(ctx context.Context, servers []*cluster.Server) (errs []error, allocs int) {
	for _, s := range servers {
		st, err := stateOf(ctx, s)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		snap := st.Snapshot()
		for _, err := range invariant.Check(snap) {
			errs = append(errs, fmt.Errorf("%s: %w", s, err))
		}
		allocs = 0
		for range snap.Allocs() {
			allocs++
		}
	}
	return errs, allocs
}

// stateOf copies a server's nodes, jobs and allocations into a state
// store of the test's own.
func stateOf(ctx context.Context, s *cluster.Server) (*state.StateStore, error) {
	st, err := state.NewStateStore()
	if err != nil {
		return nil, err
	}
	r, err := st.Restore()
	if err != nil {
		return nil, err
	}
	defer r.Abort()
	q := &droverv1.QueryOptions{AllowStale: true}
	nodes := droverv1.NewNodeServiceClient(s.Conn())
	if err := pages(func(p *droverv1.PageOptions) (string, error) {
		resp, err := nodes.List(ctx, &droverv1.ListNodesRequest{Page: p, Query: q})
		for _, n := range resp.GetNodes() {
			if err := r.Node(n); err != nil {
				return "", err
			}
		}
		return resp.GetNextToken(), err
	}); err != nil {
		return nil, fmt.Errorf("%s: list nodes: %w", s, err)
	}
	jobs := droverv1.NewJobServiceClient(s.Conn())
	if err := pages(func(p *droverv1.PageOptions) (string, error) {
		resp, err := jobs.List(ctx, &droverv1.ListJobsRequest{Page: p, Query: q})
		for _, j := range resp.GetJobs() {
			if err := r.Job(j); err != nil {
				return "", err
			}
			if err := r.JobVersion(j); err != nil {
				return "", err
			}
		}
		return resp.GetNextToken(), err
	}); err != nil {
		return nil, fmt.Errorf("%s: list jobs: %w", s, err)
	}
	allocs := droverv1.NewAllocServiceClient(s.Conn())
	if err := pages(func(p *droverv1.PageOptions) (string, error) {
		resp, err := allocs.List(ctx, &droverv1.ListAllocationsRequest{Page: p, Query: q})
		for _, a := range resp.GetAllocations() {
			if err := r.Alloc(a); err != nil {
				return "", err
			}
		}
		return resp.GetNextToken(), err
	}); err != nil {
		return nil, fmt.Errorf("%s: list allocations: %w", s, err)
	}
	r.Commit(1)
	return st, nil
}

// pages calls list for every page, from the first, until it returns an
// empty next token or an error.
func pages(list func(*droverv1.PageOptions) (string, error)) error {
	token := ""
	for {
		next, err := list(&droverv1.PageOptions{NextToken: token})
		if err != nil || next == "" {
			return err
		}
		token = next
	}
}

// pendingEvals counts the evaluations due that the leader has not finished, as
// the state says (a consistent read through srv).
func pendingEvals(ctx context.Context, srv *cluster.Server) (int, error) {
	evals := droverv1.NewEvalServiceClient(srv.Conn())
	pending := 0
	err := pages(func(p *droverv1.PageOptions) (string, error) {
		resp, err := evals.List(ctx, &droverv1.ListEvaluationsRequest{Page: p})
		for _, e := range resp.GetEvaluations() {
			// An evaluation held until a later time (a delayed
			// reschedule, the follow-up of one that failed during the
			// fault) is not work the schedulers owe yet.
			if e.GetStatus() == droverv1.EvalStatus_EVAL_STATUS_PENDING && e.GetWaitUntil() <= time.Now().UnixNano() {
				pending++
			}
		}
		return resp.GetNextToken(), err
	})
	return pending, err
}
