package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"

	"google.golang.org/protobuf/types/known/durationpb"

	droverv1 "github.com/droverhq/drover/proto/drover/v1"
)

// errDrainEnded is why following a drain fails when the drain stops without
// completing, most likely ended by `node drain -disable`.
var errDrainEnded = errors.New("the drain ended before it completed")

// followDrain follows the drain of node nodeID, started by the write at
// index since, until the servers clear it, printing a line whenever the
// number of allocations still running on the node changes. -timeout and
// Ctrl-C end the wait; the drain itself carries on.
func followDrain(ctx context.Context, s *session, w io.Writer, nodeID string, since uint64) error {
	fmt.Fprintf(w, "==> Monitoring the drain of node %q; Ctrl-C stops monitoring, not the drain\n", shortID(nodeID))
	waitCtx, stop := signal.NotifyContext(ctx, os.Interrupt)
	defer stop()
	d := &drainWatch{c: droverv1.NewNodeServiceClient(s.conn), nodeID: nodeID, since: since, running: -1, w: w}
	node, err := d.await(waitCtx)
	if err == nil && !drainCompleted(node, d.since) {
		err = errDrainEnded
	}
	if err != nil {
		switch {
		case s.timedOut(ctx) > 0:
			// The server answered; the drain is what takes long.
			err = fmt.Errorf("still draining after -timeout %s", s.opts.timeout)
		case ctx.Err() == nil && waitCtx.Err() != nil:
			err = context.Cause(waitCtx) // Ctrl-C
		}
		ended := errors.Is(err, errDrainEnded)
		err = report(s.stderr, "following the drain of node "+nodeID, err, 0)
		if ended {
			fmt.Fprintf(s.stderr, "`drover node status %s` shows the node's events.\n", shortID(nodeID))
		} else {
			fmt.Fprintf(s.stderr, "The drain carries on: `drover node status %s` shows how it goes.\n", shortID(nodeID))
		}
		return err
	}
	_, err = fmt.Fprintf(w, "Node %q drain complete\n", nodeID)
	return err
}

// drainWatch reads a draining node with blocking queries.
type drainWatch struct {
	c      droverv1.NodeServiceClient
	nodeID string
	// since is the raft index from which a drain-complete event belongs to
	// this drain: the drain's own write, then each write seen while it ran.
	since   uint64
	running int // allocations still running at the last read; -1 before the first
	w       io.Writer
}

// await reads the node until its drain strategy is cleared and returns it.
func (d *drainWatch) await(ctx context.Context) (*droverv1.Node, error) {
	var index uint64
	for {
		resp, err := d.c.Get(ctx, &droverv1.GetNodeRequest{
			NodeId: d.nodeID,
			Query:  &droverv1.QueryOptions{MinIndex: index, MaxWait: durationpb.New(followPollWait)},
		})
		if err != nil {
			return nil, err
		}
		node := resp.GetNode()
		if node.GetDrainStrategy() == nil {
			return node, nil
		}
		d.since = max(d.since, node.GetModifyIndex())
		d.count(resp.GetAllocs())
		// At least 1, so that the next read blocks rather than spins.
		index = max(index, resp.GetMeta().GetIndex(), 1)
	}
}

// count prints how many allocations are still running on the node when
// that number has changed.
func (d *drainWatch) count(allocs []*droverv1.Allocation) {
	running := stillRunning(allocs)
	if running == d.running {
		return
	}
	d.running = running
	fmt.Fprintf(d.w, "==> %s still running on the node\n", plural(int32(running), "allocation"))
}

// stillRunning counts the allocations that are not client-terminal: those
// a drain still waits for.
func stillRunning(allocs []*droverv1.Allocation) int {
	n := 0
	for _, a := range allocs {
		if !a.ClientTerminal() {
			n++
		}
	}
	return n
}

// drainCompleted reports whether a node whose drain strategy is cleared
// records the completion of a drain at or after index since, rather than
// having had its drain ended.
func drainCompleted(n *droverv1.Node, since uint64) bool {
	for _, ev := range n.GetEvents() {
		if ev.GetSubsystem() == droverv1.NodeEventSubsystemDrain &&
			ev.GetMessage() == droverv1.NodeEventDrainComplete && ev.GetCreateIndex() >= since {
			return true
		}
	}
	return false
}
