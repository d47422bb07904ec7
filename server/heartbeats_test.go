package server_test

import (
	"context"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"google.golang.org/protobuf/types/known/durationpb"

	"github.com/droverhq/drover/internal/mock"
	"github.com/droverhq/drover/internal/testserver"
	droverv1 "github.com/droverhq/drover/proto/drover/v1"
	"github.com/droverhq/drover/server"
)

// fastHeartbeats makes nodes that stop heartbeating go down in well under
// a second, and serves metrics.
func fastHeartbeats(cfg *server.Config) {
	cfg.Heartbeat.MinTTL = 100 * time.Millisecond
	cfg.Heartbeat.Grace = 100 * time.Millisecond
	cfg.Heartbeat.MassFailureFraction = 0
	cfg.HTTPAddr = "127.0.0.1:0"
}

// TestMissedHeartbeats checks what the leader's timers do with nodes that
// stop heartbeating: a node with nothing that outlives a disconnect goes
// down; a node running an allocation whose group sets
// max_client_disconnect becomes disconnected with the allocation unknown
// (recorded by an AllocState entry, in the same write), and goes down once
// the window has passed. Evaluations come with each change, and the
// metrics endpoint counts the expiries.
func TestMissedHeartbeats(t *testing.T) {
	srv := testserver.Start(t, fastHeartbeats)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	nodes := droverv1.NewNodeServiceClient(srv.Conn)
	plain, tolerant := mock.Node(), mock.Node()
	stopTolerant := keepHeartbeating(ctx, t, nodes, tolerant)
	stopPlain := keepHeartbeating(ctx, t, nodes, plain)

	job := mock.Job(1)
	job.Constraints = []*droverv1.Constraint{{Attribute: "node.id", Operator: droverv1.ConstraintOperator_CONSTRAINT_OPERATOR_EQUAL, Value: tolerant.GetId()}}
	job.GetTaskGroups()[0].MaxClientDisconnect = durationpb.New(time.Second)
	if _, err := droverv1.NewJobServiceClient(srv.Conn).Register(ctx, &droverv1.RegisterJobRequest{Job: job}); err != nil {
		t.Fatal(err)
	}
	alloc := waitFor(ctx, t, "the job placed", func() *droverv1.Allocation {
		resp, err := droverv1.NewJobServiceClient(srv.Conn).Allocations(ctx, &droverv1.ListJobAllocationsRequest{JobId: job.GetId()})
		if err != nil || len(resp.GetAllocations()) != 1 {
			return nil
		}
		return resp.GetAllocations()[0]
	})
	if _, err := nodes.UpdateAlloc(ctx, &droverv1.UpdateAllocRequest{NodeId: tolerant.GetId(), SecretId: tolerant.GetSecretId(),
		Allocs: []*droverv1.AllocClientUpdate{{AllocId: alloc.GetId(), ClientStatus: droverv1.AllocClientStatus_ALLOC_CLIENT_STATUS_RUNNING}}}); err != nil {
		t.Fatal(err)
	}

	stopPlain()
	down := waitNodeStatus(ctx, t, srv, plain.GetId(), droverv1.NodeStatus_NODE_STATUS_DOWN)
	if down.GetLastMissedHeartbeatIndex() == 0 || !strings.Contains(down.GetEvents()[len(down.GetEvents())-1].GetMessage(), "heartbeat missed") {
		t.Errorf("down node: last missed heartbeat %d, events %v", down.GetLastMissedHeartbeatIndex(), down.GetEvents())
	}

	stopTolerant()
	disc := waitNodeStatus(ctx, t, srv, tolerant.GetId(), droverv1.NodeStatus_NODE_STATUS_DISCONNECTED)
	snap := srv.State().Snapshot()
	a := snap.AllocByID(alloc.GetId())
	if a.GetClientStatus() != droverv1.AllocClientStatus_ALLOC_CLIENT_STATUS_UNKNOWN || a.UnknownSince() == 0 {
		t.Fatalf("allocation on the disconnected node: %s, states %v", a.GetClientStatus(), a.GetAllocStates())
	}
	// Both come from the one entry, stamped with its time (the scheduler
	// may have written the allocation since, to record its follow-up).
	if a.UnknownSince() != disc.GetStatusUpdatedAt() {
		t.Errorf("allocation marked unknown at %d, node disconnected at %d: want one write", a.UnknownSince(), disc.GetStatusUpdatedAt())
	}
	evals := 0
	for ev := range snap.EvalsByJob(job.GetId()) {
		if ev.GetNodeId() == tolerant.GetId() && ev.GetNodeModifyIndex() == disc.GetLastMissedHeartbeatIndex() {
			evals++
		}
	}
	if evals != 1 {
		t.Errorf("%d evaluations written with the disconnect, want 1", evals)
	}
	// Once max_client_disconnect (1s) has passed, a later expiry finds
	// nothing that may outlive the disconnect.
	waitNodeStatus(ctx, t, srv, tolerant.GetId(), droverv1.NodeStatus_NODE_STATUS_DOWN)

	metrics := scrape(ctx, t, "http://"+srv.HTTPAddr()+"/metrics")
	for _, want := range []string{"drover_heartbeat_expired_total", "drover_heartbeat_marked_total", "drover_heartbeats_total",
		"drover_heartbeat_mass_failure_throttled 0",
		// The scheduling path ran too: a job was placed.
		`drover_raft_apply_seconds_count{type="PlanResult"}`, `drover_raft_entry_bytes_proposed_total{type="PlanResult"}`, `drover_worker_process_seconds_count{outcome="ok",scheduler="service"}`,
		"drover_worker_dequeue_seconds_count", "drover_worker_plan_submit_seconds_count", `drover_broker_evals{state="ready"}`,
		"drover_plans_applied_total", "drover_plan_queue_depth", "drover_blocking_queries", `drover_blocked_evals{kind="escaped"}`} {
		if !strings.Contains(grepLines(metrics, "drover_"), want) {
			t.Errorf("metrics lack %q", want)
		}
	}
}

// keepHeartbeating registers n and heartbeats it every 30ms until the
// returned stop is called; stop waits for the loop to end.
func keepHeartbeating(ctx context.Context, t *testing.T, nodes droverv1.NodeServiceClient, n *droverv1.Node) (stop func()) {
	t.Helper()
	if _, err := nodes.Register(ctx, &droverv1.RegisterNodeRequest{Node: n}); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() {
		defer close(done)
		ticker := time.NewTicker(30 * time.Millisecond)
		defer ticker.Stop()
		for {
			_, _ = nodes.UpdateStatus(ctx, &droverv1.UpdateNodeStatusRequest{NodeId: n.GetId(), SecretId: n.GetSecretId(), Status: droverv1.NodeStatus_NODE_STATUS_READY})
			select {
			case <-ctx.Done():
				return
			case <-ticker.C:
			}
		}
	}()
	waitFor(ctx, t, "node "+n.GetId()+" ready", func() *droverv1.Node {
		resp, err := nodes.Get(ctx, &droverv1.GetNodeRequest{NodeId: n.GetId()})
		if err != nil || resp.GetNode().GetStatus() != droverv1.NodeStatus_NODE_STATUS_READY {
			return nil
		}
		return resp.GetNode()
	})
	return func() {
		cancel()
		<-done
	}
}

func waitNodeStatus(ctx context.Context, t *testing.T, srv *testserver.Server, id string, want droverv1.NodeStatus) *droverv1.Node {
	t.Helper()
	return waitFor(ctx, t, "node "+id+" "+want.String(), func() *droverv1.Node {
		if n := srv.State().Snapshot().NodeByID(id); n.GetStatus() == want {
			return n
		}
		return nil
	})
}

// waitFor polls get until it returns non-nil.
func waitFor[T comparable](ctx context.Context, t *testing.T, what string, get func() T) T {
	t.Helper()
	var zero T
	for {
		if v := get(); v != zero {
			return v
		}
		select {
		case <-ctx.Done():
			t.Fatalf("waiting for %s: %v", what, ctx.Err())
		case <-time.After(20 * time.Millisecond):
		}
	}
}

func scrape(ctx context.Context, t *testing.T, url string) string {
	t.Helper()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		t.Fatal(err)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("GET %s: %d %v", url, resp.StatusCode, err)
	}
	return string(body)
}

// TestMassFailureGuard stops the heartbeats of a whole fleet at once, as a
// network fault on the servers' side would. The leader marks the first
// few, then sees the share of the fleet gone silent, throttles, logs and
// exposes it; the nodes that heartbeat again before their turn are never
// marked.
func TestMassFailureGuard(t *testing.T) {
	srv := testserver.Start(t, fastHeartbeats, func(cfg *server.Config) {
		cfg.Heartbeat.MassFailureFraction = 1.0 / 3
		cfg.Heartbeat.MassFailureWindow = time.Second
		cfg.Heartbeat.MassFailureMinNodes = 5
		cfg.Heartbeat.ThrottledMarkRate = 2
	})
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	nodes := droverv1.NewNodeServiceClient(srv.Conn)
	const fleet = 30
	var fleetNodes []*droverv1.Node
	var stops []func()
	for range fleet {
		n := mock.Node()
		fleetNodes = append(fleetNodes, n)
		stops = append(stops, keepHeartbeating(ctx, t, nodes, n))
	}
	for _, stop := range stops {
		stop()
	}
	url := "http://" + srv.HTTPAddr() + "/metrics"
	waitFor(ctx, t, "the guard to engage", func() bool {
		return hasLine(scrape(ctx, t, url), "drover_heartbeat_mass_failure_throttled 1")
	})
	for _, n := range fleetNodes {
		defer keepHeartbeating(ctx, t, nodes, n)()
	}
	waitFor(ctx, t, "the guard to disengage", func() bool {
		return hasLine(scrape(ctx, t, url), "drover_heartbeat_mass_failure_throttled 0")
	})
	metrics := scrape(ctx, t, url)
	if !hasLine(metrics, "drover_heartbeat_mass_failure_engagements_total 1") {
		t.Errorf("want one engagement in:\n%s", grepLines(metrics, "drover_heartbeat"))
	}
	down := 0
	for n := range srv.State().Snapshot().Nodes() {
		for _, ev := range n.GetEvents() {
			if strings.Contains(ev.GetMessage(), "heartbeat missed") {
				down++
				break
			}
		}
	}
	t.Logf("%d of %d nodes marked before the guard engaged and while it throttled", down, fleet)
	if down == 0 || down >= fleet/2 {
		t.Errorf("%d of %d nodes were marked; want the first few only, the rest back before their turn", down, fleet)
	}
}

func grepLines(text, prefix string) string {
	var out []string
	for _, l := range strings.Split(text, "\n") {
		if strings.HasPrefix(l, prefix) {
			out = append(out, l)
		}
	}
	return strings.Join(out, "\n")
}

// hasLine reports whether the metrics text has exactly this sample line.
func hasLine(text, line string) bool {
	return strings.Contains("\n"+text, "\n"+line+"\n")
}
