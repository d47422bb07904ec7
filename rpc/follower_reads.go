package rpc

import (
	"context"
	"fmt"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/droverhq/drover/internal/rounds"
	droverv1 "github.com/droverhq/drover/proto/drover/v1"
)

// followerReadWait bounds how long a follower waits for its state to reach
// the leader's read index before it forwards the read instead. A follower
// in touch with its leader applies the index within milliseconds; one cut
// off from raft traffic would otherwise hold the read until its caller
// gave up. A follower that has not heard from the leader for this long
// forwards at once.
const followerReadWait = time.Second

// Where a consistent read was answered, the label of
// drover_consistent_reads_total.
const (
	answeredByLeader   = "leader"
	answeredByFollower = "follower"
	answeredByForward  = "forwarded"
)

// consistentReads counts consistent reads by where they were answered.
type consistentReads struct {
	total *prometheus.CounterVec
}

func newConsistentReads() *consistentReads {
	total := prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "drover_consistent_reads_total",
		Help: "Consistent reads that reached this server, by where they were answered: " +
			"leader (this server led), follower (here, after the leader's read index), forwarded (by the leader).",
	}, []string{"answered"})
	for _, l := range []string{answeredByLeader, answeredByFollower, answeredByForward} {
		total.WithLabelValues(l)
	}
	return &consistentReads{total: total}
}

func (c *consistentReads) count(answered string) {
	if c != nil {
		c.total.WithLabelValues(answered).Inc()
	}
}

// followerReads answers consistent reads on a follower from its own state:
// the leader confirms that it leads and names an index covering every write
// committed before the read (ClusterService.ReadIndex); the follower waits
// until its state has applied that index and answers. The leader's work is
// one quorum confirmation per round, shared by every read that joined it,
// instead of the whole read.
type followerReads struct {
	f *forwarder
	// waitApplied returns once this server's state has applied index.
	waitApplied func(ctx context.Context, index uint64) error
	// indexes shares one ReadIndex call among the reads that arrive while
	// the previous one is in flight.
	indexes *rounds.Rounds[uint64]
}

func newFollowerReads(f *forwarder, waitApplied func(ctx context.Context, index uint64) error) *followerReads {
	fr := &followerReads{f: f, waitApplied: waitApplied}
	fr.indexes = rounds.New(fr.fetchIndex)
	return fr
}

// answer runs the read here once this server's state holds everything the
// leader had committed when the read began. answered is false when the
// read must go to the leader instead: this server is out of touch with
// the leader, the leader gave no index (it changed, or its release does
// not know ReadIndex), or the state did not reach the index within
// followerReadWait. An error ends the read.
func (fr *followerReads) answer(ctx context.Context, req any, handler func(context.Context, any) (any, error)) (resp any, answered bool, err error) {
	if fr == nil || tooStale(fr.f.lastContact(), followerReadWait) {
		return nil, false, nil
	}
	index, err := fr.indexes.Wait(ctx)
	if err != nil {
		if ctx.Err() != nil {
			return nil, true, fmt.Errorf("consistent read: wait for the leader's read index: %w", ctx.Err())
		}
		fr.f.logger.Debug("read index refused; forwarding the read", "err", err)
		return nil, false, nil
	}
	wait, cancel := context.WithTimeout(ctx, followerReadWait)
	err = fr.waitApplied(wait, index)
	cancel()
	if err != nil {
		if ctx.Err() != nil {
			return nil, true, fmt.Errorf("consistent read: wait for read index %d: %w", index, ctx.Err())
		}
		fr.f.logger.Debug("state behind the read index; forwarding the read", "index", index, "err", err)
		return nil, false, nil
	}
	fr.f.reads.count(answeredByFollower)
	resp, err = handler(withConsistentAnswer(ctx), req)
	return resp, true, err
}

// fetchIndex asks the leader known now for its read index. It runs in a
// round of its own, for every read that joined it, so it is bounded by the
// forwarder's hold and the server's shutdown rather than by one caller.
func (fr *followerReads) fetchIndex() (uint64, error) {
	leader := fr.f.cluster.Leader()
	if leader.Local || leader.RPCAddr == "" {
		return 0, fmt.Errorf("read index: no remote leader known: %w", ErrUnavailable)
	}
	ctx, cancel := fr.f.detached(time.Now().Add(fr.f.hold))
	defer cancel()
	resp, err := fr.f.forward(ctx, leader.RPCAddr, droverv1.ClusterService_ReadIndex_FullMethodName, &droverv1.ReadIndexRequest{}, 1)
	if err != nil {
		return 0, fmt.Errorf("read index from leader %s at %s: %w", leader.ID, leader.RPCAddr, err)
	}
	ri, ok := resp.(*droverv1.ReadIndexResponse)
	if !ok {
		return 0, fmt.Errorf("read index from leader %s: answer of type %T", leader.ID, resp)
	}
	return ri.GetIndex(), nil
}

// consistentAnswerKey marks the context of a consistent read answered on a
// follower: its answer is as fresh as the leader's, so it reports no
// staleness (QueryMeta.last_contact zero, as the leader's does).
type consistentAnswerKey struct{}

func withConsistentAnswer(ctx context.Context) context.Context {
	return context.WithValue(ctx, consistentAnswerKey{}, true)
}

func consistentAnswer(ctx context.Context) bool {
	v, _ := ctx.Value(consistentAnswerKey{}).(bool)
	return v
}
