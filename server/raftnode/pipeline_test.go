package raftnode

import (
	"testing"
	"time"

	"github.com/hashicorp/raft"
)

// fakePipeline is a network pipeline whose answers arrive on a channel of
// one slot, as the network pipeline's bounded channel does once full.
type fakePipeline struct {
	answers chan raft.AppendFuture
	closed  bool
}

func (f *fakePipeline) AppendEntries(*raft.AppendEntriesRequest, *raft.AppendEntriesResponse) (raft.AppendFuture, error) {
	return nil, nil
}
func (f *fakePipeline) Consumer() <-chan raft.AppendFuture { return f.answers }
func (f *fakePipeline) Close() error                       { f.closed = true; return nil }

// fakeFuture is an answer, told apart by n.
type fakeFuture struct {
	raft.AppendFuture
	n int
}

// TestDrainedPipelineKeepsTakingAnswers: while raft reads none of a
// pipeline's answers (it stopped at a refused append), the network side
// can still hand over many more than its buffer holds; raft then reads
// them all, in order; Close closes the network pipeline.
func TestDrainedPipelineKeepsTakingAnswers(t *testing.T) {
	inner := &fakePipeline{answers: make(chan raft.AppendFuture, 1)}
	d := newDrainedPipeline(inner)
	const answers = 300
	handed := make(chan struct{})
	go func() {
		defer close(handed)
		for i := range answers {
			inner.answers <- fakeFuture{n: i}
		}
	}()
	select {
	case <-handed:
	case <-time.After(10 * time.Second):
		t.Fatal("the network side blocked handing over answers nobody reads")
	}
	for i := range answers {
		f := (<-d.Consumer()).(fakeFuture)
		if f.n != i {
			t.Fatalf("answer %d read as the %dth", f.n, i)
		}
	}
	if err := d.Close(); err != nil || !inner.closed {
		t.Fatalf("Close = %v, network pipeline closed %v", err, inner.closed)
	}
	if err := d.Close(); err != nil {
		t.Fatalf("second Close = %v", err)
	}
}
