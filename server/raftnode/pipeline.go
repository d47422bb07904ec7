package raftnode

import (
	"sync"

	"github.com/hashicorp/raft"
)

// transport is raft's network transport with append pipelines whose
// answers are always drained (drainedPipeline). Everything else is the
// network transport's own, so raft sees the same optional interfaces
// (pre-vote, peer connections, close).
type transport struct{ *raft.NetworkTransport }

// AppendEntriesPipeline opens the network transport's pipeline to target
// and drains it.
func (t transport) AppendEntriesPipeline(id raft.ServerID, target raft.ServerAddress) (raft.AppendPipeline, error) {
	p, err := t.NetworkTransport.AppendEntriesPipeline(id, target)
	if err != nil {
		return nil, err
	}
	return newDrainedPipeline(p), nil
}

// drainedPipeline keeps taking a pipeline's answers, whether or not raft
// still reads them, until the pipeline is closed.
//
// hashicorp/raft (v1.7.3, replication.go) stops reading a pipeline's
// answers at the first refused append (a follower whose disk is full, or
// that lacks the previous entry), and its sender only notices between two
// sends. The network pipeline holds at most 128 answers not yet read and
// 128 requests not yet answered; once both are full, the next send blocks
// for good: replication to that follower stops while heartbeats go on, so
// the follower never catches up and never calls an election (seen in the
// fault suite's disk-full fault, with the leader sending every 5ms). The
// answers taken here wait in a queue for raft, which reads them in order
// as before; requests in flight stay bounded by the network pipeline.
type drainedPipeline struct {
	raft.AppendPipeline
	out       chan raft.AppendFuture
	done      chan struct{}
	closeOnce sync.Once
}

func newDrainedPipeline(p raft.AppendPipeline) *drainedPipeline {
	d := &drainedPipeline{AppendPipeline: p, out: make(chan raft.AppendFuture), done: make(chan struct{})}
	go d.forward(p.Consumer())
	return d
}

// forward moves answers from the network pipeline to raft, queueing those
// raft has not taken yet.
func (d *drainedPipeline) forward(in <-chan raft.AppendFuture) {
	var queue []raft.AppendFuture
	for {
		var out chan raft.AppendFuture
		var next raft.AppendFuture
		if len(queue) > 0 {
			out, next = d.out, queue[0]
		}
		select {
		case f := <-in:
			queue = append(queue, f)
		case out <- next:
			queue[0] = nil
			queue = queue[1:]
		case <-d.done:
			return
		}
	}
}

// Consumer returns the answers in the order the requests were sent.
func (d *drainedPipeline) Consumer() <-chan raft.AppendFuture { return d.out }

// Close closes the network pipeline and stops draining it.
func (d *drainedPipeline) Close() error {
	d.closeOnce.Do(func() { close(d.done) })
	return d.AppendPipeline.Close()
}
