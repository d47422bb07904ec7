package rpc

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	spb "google.golang.org/genproto/googleapis/rpc/status"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/droverhq/drover/internal/groupcommit"
	droverv1 "github.com/droverhq/drover/proto/drover/v1"
)

// An agent's allocation reports are the calls a server passes on to the
// leader most often: every agent connected to a follower reports each of
// its allocations as it starts, runs and ends. Passed on one by one, each
// costs the leader a gRPC call of its own. A follower instead gathers the
// reports that arrive while its previous batch is in flight and passes
// them on in one ForwardAllocReports call; the leader runs each as
// UpdateAlloc and answers each on its own.

// forwardedReportAllocs bounds the allocations of one batch, so that a
// batch stays well inside MaxForwardedReports calls and the message size.
const forwardedReportAllocs = 2048

// forwardedReportsTimeout bounds a batch whose calls have no deadline.
const forwardedReportsTimeout = 30 * time.Second

// errNoReportBatches ends a batch sent to a leader whose release does not
// know ForwardAllocReports: its calls are forwarded one by one instead.
var errNoReportBatches = errors.New("the leader's release does not take batches of allocation reports")

// reportBatcher passes agents' UpdateAlloc calls on to the leader in
// batches, one batch in flight at a time.
type reportBatcher struct {
	f *forwarder

	mu sync.Mutex
	// leader is the leader the current batches go to; batches gathers
	// the calls for it.
	leader  Leader
	batches *groupcommit.Committer[*droverv1.ForwardedAllocReport]
	// unbatched are leaders (by id and address) that answered a batch
	// UNIMPLEMENTED.
	unbatched map[string]bool
}

func newReportBatcher(f *forwarder) *reportBatcher {
	return &reportBatcher{f: f, unbatched: make(map[string]bool)}
}

// forwardCall forwards one call to leader: an agent's allocation report
// joins the next batch of reports for that leader; any other call, and a
// report another server already forwarded, goes alone.
func (f *forwarder) forwardCall(ctx context.Context, changed <-chan struct{}, leader Leader, method string, req any, hops int) (any, error) {
	if r, ok := req.(*droverv1.UpdateAllocRequest); ok && hops == 1 {
		if resp, batched, err := f.reports.forward(ctx, leader, r); batched {
			return resp, err
		}
	}
	return f.forwardWhileLeader(ctx, changed, leader, method, req, hops)
}

// forward adds the call to the next batch for leader and returns the
// leader's answer to it. batched is false when leader takes no batches:
// the call is to be forwarded alone.
func (b *reportBatcher) forward(ctx context.Context, leader Leader, req *droverv1.UpdateAllocRequest) (resp *droverv1.UpdateAllocResponse, batched bool, err error) {
	batches := b.batchesFor(leader)
	if batches == nil {
		return nil, false, nil
	}
	item := &droverv1.ForwardedAllocReport{Request: req}
	if d, ok := ctx.Deadline(); ok {
		item.Deadline = d.UnixNano()
	}
	// A malformed call without allocations still counts, so that a batch
	// never carries more calls than the leader takes.
	g, pos, err := batches.Submit(ctx, item, max(1, len(req.GetAllocs())))
	switch {
	case errors.Is(err, errNoReportBatches):
		return nil, false, nil
	case err != nil:
		return nil, true, err
	}
	out, ok := g.Response.(*droverv1.ForwardAllocReportsResponse)
	if !ok || pos >= len(out.GetOutcomes()) {
		return nil, true, status.Errorf(codes.Internal, "leader %s gave no answer for forwarded report %d", leader.ID, pos)
	}
	resp, err = reportResult(out.GetOutcomes()[pos])
	return resp, true, err
}

// batchesFor returns the batches for leader, nil if leader takes none.
func (b *reportBatcher) batchesFor(leader Leader) *groupcommit.Committer[*droverv1.ForwardedAllocReport] {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.unbatched[leaderKey(leader)] {
		return nil
	}
	if b.batches == nil || b.leader.ID != leader.ID || b.leader.RPCAddr != leader.RPCAddr {
		b.leader = leader
		b.batches = &groupcommit.Committer[*droverv1.ForwardedAllocReport]{
			MaxWeight: forwardedReportAllocs,
			Write: func(items []*droverv1.ForwardedAllocReport) (uint64, any, error) {
				resp, err := b.send(leader, items)
				return 0, resp, err
			},
		}
	}
	return b.batches
}

func leaderKey(l Leader) string { return l.ID + "@" + l.RPCAddr }

// send passes one batch on to leader. A batch for a leader that is no
// longer the leader, or that changes while the batch is in flight, fails
// with errLeaderChanged, and one that outlives its own bound with
// UNAVAILABLE: either way each call goes again, within its own deadline,
// as a call forwarded alone would.
func (b *reportBatcher) send(leader Leader, items []*droverv1.ForwardedAllocReport) (*droverv1.ForwardAllocReportsResponse, error) {
	changed := b.f.cluster.LeaderChanged()
	if now := b.f.cluster.Leader(); now.ID != leader.ID || now.RPCAddr != leader.RPCAddr {
		return nil, errLeaderChanged
	}
	ctx, cancel := b.f.detached(batchDeadline(items, time.Now()))
	defer cancel()
	req := &droverv1.ForwardAllocReportsRequest{Reports: items}
	resp, err := b.f.forwardWhileLeader(ctx, changed, leader, droverv1.ClusterService_ForwardAllocReports_FullMethodName, req, 1)
	switch {
	case status.Code(err) == codes.Unimplemented:
		b.mu.Lock()
		b.unbatched[leaderKey(leader)] = true
		b.mu.Unlock()
		b.f.logger.Info("the leader takes no batches of allocation reports; forwarding them one by one", "leader", leader.ID)
		return nil, errNoReportBatches
	case errors.Is(err, errLeaderChanged):
		return nil, err
	case err != nil && ctx.Err() != nil:
		return nil, unavailable(fmt.Sprintf("forwarded reports to leader %s: %v", leader.ID, err))
	case err != nil:
		return nil, err
	}
	out, ok := resp.(*droverv1.ForwardAllocReportsResponse)
	if !ok || len(out.GetOutcomes()) != len(items) {
		return nil, status.Errorf(codes.Internal, "leader %s answered %d of %d forwarded reports", leader.ID, len(out.GetOutcomes()), len(items))
	}
	return out, nil
}

// batchDeadline is the latest deadline of the batch's calls: the batch
// must not give up on any of them early. A call without a deadline counts
// as forwardedReportsTimeout from now.
func batchDeadline(items []*droverv1.ForwardedAllocReport, now time.Time) time.Time {
	var latest time.Time
	for _, it := range items {
		d := now.Add(forwardedReportsTimeout)
		if it.GetDeadline() != 0 {
			d = time.Unix(0, it.GetDeadline())
		}
		if d.After(latest) {
			latest = d
		}
	}
	return latest
}

// ForwardAllocReports runs on the leader (the forwarder sends it there):
// every call at once, each as UpdateAlloc, so that they share the
// reports' batching window like calls made here.
func (s *clusterService) ForwardAllocReports(ctx context.Context, req *droverv1.ForwardAllocReportsRequest) (*droverv1.ForwardAllocReportsResponse, error) {
	if err := req.Validate(); err != nil {
		return nil, err
	}
	nodes := &nodeService{services: s.services}
	reports := req.GetReports()
	out := make([]*droverv1.AllocReportOutcome, len(reports))
	var wg sync.WaitGroup
	for i, r := range reports {
		wg.Go(func() {
			resp, err := runForwardedReport(ctx, nodes, r)
			out[i] = reportOutcome(resp, toStatus(err, s.logger))
		})
	}
	wg.Wait()
	return &droverv1.ForwardAllocReportsResponse{Outcomes: out}, nil
}

// runForwardedReport runs one forwarded call within its caller's
// deadline, or refuses it if that has passed.
func runForwardedReport(ctx context.Context, nodes *nodeService, r *droverv1.ForwardedAllocReport) (*droverv1.UpdateAllocResponse, error) {
	if ns := r.GetDeadline(); ns != 0 {
		var cancel context.CancelFunc
		var err error
		ctx, cancel, err = withCallerDeadline(ctx, ns)
		defer cancel()
		if err != nil {
			return nil, err
		}
	}
	return nodes.UpdateAlloc(ctx, r.GetRequest())
}

// reportOutcome is the wire form of a call's answer; err is a gRPC status.
func reportOutcome(resp *droverv1.UpdateAllocResponse, err error) *droverv1.AllocReportOutcome {
	if err == nil {
		return &droverv1.AllocReportOutcome{Response: resp}
	}
	st := status.Convert(err).Proto()
	return &droverv1.AllocReportOutcome{Code: st.GetCode(), Message: st.GetMessage(), Details: st.GetDetails()}
}

// reportResult is the answer an outcome carries.
func reportResult(o *droverv1.AllocReportOutcome) (*droverv1.UpdateAllocResponse, error) {
	if o.GetCode() != int32(codes.OK) {
		return nil, status.FromProto(&spb.Status{Code: o.GetCode(), Message: o.GetMessage(), Details: o.GetDetails()}).Err()
	}
	if o.GetResponse() == nil {
		return nil, status.Error(codes.Internal, "forwarded report answered without a response")
	}
	return o.GetResponse(), nil
}
