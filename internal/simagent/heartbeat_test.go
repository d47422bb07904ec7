package simagent

import (
	"testing"
	"time"

	"google.golang.org/protobuf/types/known/durationpb"

	droverv1 "github.com/droverhq/drover/proto/drover/v1"
)

// TestNextHeartbeatCountsFromSend checks that an accepted heartbeat's
// successor is due within the share of the TTL the fleet asks for, counted
// from when the heartbeat was sent however long its answer took: the
// leader reset the node's timer before it answered, so counting from the
// answer would let a slow answer carry the node past its timer.
func TestNextHeartbeatCountsFromSend(t *testing.T) {
	const ttl = 2 * time.Second
	f := &Fleet{cfg: Config{HeartbeatMin: 0.5, HeartbeatMax: 0.9}, pool: &pool{}}
	a := &Agent{f: f, node: Node{ID: "node-1"}}
	resp := &droverv1.UpdateNodeStatusResponse{HeartbeatTtl: durationpb.New(ttl), Status: droverv1.NodeStatus_NODE_STATUS_READY}
	for _, answerTook := range []time.Duration{0, 300 * time.Millisecond, 1500 * time.Millisecond, 3 * time.Second} {
		t.Run(answerTook.String(), func(t *testing.T) {
			sent := time.Now().Add(-answerTook)
			earliest, latest := sent.Add(ttl/2), sent.Add(ttl*9/10)
			for range 50 {
				due := time.Unix(0, a.beatAccepted(sent, resp))
				if due.Before(earliest) || due.After(latest) {
					t.Fatalf("answer after %s: next heartbeat due %s after the send, want %s to %s",
						answerTook, due.Sub(sent), earliest.Sub(sent), latest.Sub(sent))
				}
			}
			if got := a.lastOK.Load(); got != sent.UnixNano() {
				t.Errorf("last accepted heartbeat sent at %d, want %d", got, sent.UnixNano())
			}
		})
	}
}
