package test_test

import (
	"context"
	"errors"
	"fmt"
	"sync"

	"google.golang.org/grpc"

	droverv1 "github.com/droverhq/drover/proto/drover/v1"
)

// reconnectWatch follows one seed's job and flaky node on the event
// stream, entry by entry, and records every violation of the reconnect
// rules it sees.
type reconnectWatch struct {
	jobID, nodeID string
	entries       *entryFollower

	mu         sync.Mutex
	violations []error

	// Followed state, touched by the stream goroutine only.
	allocs     map[string]*droverv1.Allocation
	placed     bool
	lastMissed uint64
	nodeStatus droverv1.NodeStatus
}

func startReconnectWatch(ctx context.Context, conn grpc.ClientConnInterface, from uint64, jobID, nodeID string) *reconnectWatch {
	w := &reconnectWatch{jobID: jobID, nodeID: nodeID, allocs: make(map[string]*droverv1.Allocation)}
	topics := []droverv1.Topic{droverv1.Topic_TOPIC_NODE, droverv1.Topic_TOPIC_ALLOCATION}
	w.entries = followEntries(ctx, conn, from, topics, func(resp *droverv1.StreamEventsResponse) {
		for _, ev := range resp.GetEvents() {
			w.apply(ev)
		}
		w.checkEntry(resp.GetIndex())
	})
	return w
}

func (w *reconnectWatch) violate(format string, args ...any) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.violations = append(w.violations, fmt.Errorf(format, args...))
}

// apply follows one event of the job's allocations or the flaky node.
func (w *reconnectWatch) apply(ev *droverv1.Event) {
	switch p := ev.GetPayload().(type) {
	case *droverv1.Event_Allocation:
		a := p.Allocation
		if a.GetJobId() != w.jobID {
			return
		}
		old := w.allocs[a.GetId()]
		if a.ServerTerminal() && !old.ServerTerminal() && a.GetDesiredDescription() == "" {
			w.violate("index %d: allocation %s stopped without a reason", ev.GetIndex(), a.GetId())
		}
		w.allocs[a.GetId()] = a
	case *droverv1.Event_Node:
		n := p.Node
		if n.GetId() != w.nodeID {
			return
		}
		switch n.GetStatus() {
		case droverv1.NodeStatus_NODE_STATUS_DOWN, droverv1.NodeStatus_NODE_STATUS_DISCONNECTED:
			w.lastMissed = n.GetLastMissedHeartbeatIndex()
		case droverv1.NodeStatus_NODE_STATUS_READY:
			// The servers' rule (nextStatus): a node holding live
			// allocations is ready again only after reporting them; one
			// whose allocations all ended meanwhile (lost while it was
			// down) has nothing to report.
			if w.nodeStatus != droverv1.NodeStatus_NODE_STATUS_READY && w.lastMissed > 0 && n.GetLastAllocUpdateIndex() <= w.lastMissed && w.liveOn(n.GetId()) {
				w.violate("index %d: node ready with its last allocation report at %d, not after its missed heartbeat at %d",
					ev.GetIndex(), n.GetLastAllocUpdateIndex(), w.lastMissed)
			}
		}
		w.nodeStatus = n.GetStatus()
	}
}

// liveOn reports whether an allocation of the job on the node has not
// ended, as the servers see it.
func (w *reconnectWatch) liveOn(nodeID string) bool {
	for _, a := range w.allocs {
		if a.GetNodeId() == nodeID && !a.Terminal() {
			return true
		}
	}
	return false
}

// checkEntry checks the group after a whole raft entry: from its first
// placement on, something of it must be wanted running and not ended.
func (w *reconnectWatch) checkEntry(index uint64) {
	alive := 0
	for _, a := range w.allocs {
		if !a.ServerTerminal() && !a.ClientTerminal() {
			alive++
		}
	}
	if alive > 0 {
		w.placed = true
	} else if w.placed {
		w.violate("index %d: the group has no allocation running or starting", index)
	}
}

// wait waits until the watch has followed the stream to index, stops it,
// and returns the violations seen.
func (w *reconnectWatch) wait(ctx context.Context, index uint64) error {
	defer w.entries.stop()
	if err := w.entries.waitFor(ctx, index); err != nil {
		return err
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	return errors.Join(w.violations...)
}
