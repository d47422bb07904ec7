package rpc_test

import (
	"context"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"google.golang.org/grpc/codes"

	"github.com/droverhq/drover/internal/mock"
	"github.com/droverhq/drover/internal/testserver"
	droverv1 "github.com/droverhq/drover/proto/drover/v1"
	"github.com/droverhq/drover/server"
)

const (
	initializing = droverv1.NodeStatus_NODE_STATUS_INITIALIZING
	ready        = droverv1.NodeStatus_NODE_STATUS_READY
	down         = droverv1.NodeStatus_NODE_STATUS_DOWN
	disconnected = droverv1.NodeStatus_NODE_STATUS_DISCONNECTED
	running      = droverv1.AllocClientStatus_ALLOC_CLIENT_STATUS_RUNNING
	failed       = droverv1.AllocClientStatus_ALLOC_CLIENT_STATUS_FAILED
)

func TestRegisterCreatesInitializingNode(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	n := mock.Node()
	n.Status = ready // server-owned: ignored
	n.SchedulingEligibility = droverv1.SchedulingEligibility_SCHEDULING_ELIGIBILITY_INELIGIBLE
	resp, err := e.nodes.Register(e.ctx(), &droverv1.RegisterNodeRequest{Node: n})
	if err != nil {
		t.Fatal(err)
	}
	if resp.GetStatus() != initializing || resp.GetSchedulingEligibility() != droverv1.SchedulingEligibility_SCHEDULING_ELIGIBILITY_ELIGIBLE {
		t.Errorf("registered as %s/%s, want initializing/eligible", resp.GetStatus(), resp.GetSchedulingEligibility())
	}
	if ttl := resp.GetHeartbeatTtl().AsDuration(); ttl < 10*time.Second || ttl >= 20*time.Second {
		t.Errorf("heartbeat TTL = %s, want in [10s, 20s)", ttl)
	}
	// Agents built before 0.3 read only the legacy field.
	if legacy := resp.GetHeartbeatTtlNs(); legacy != int64(resp.GetHeartbeatTtl().AsDuration()) {
		t.Errorf("legacy heartbeat_ttl_ns = %d, want heartbeat_ttl %s in nanoseconds", legacy, resp.GetHeartbeatTtl().AsDuration())
	}
	if len(resp.GetServers()) != 1 || resp.GetServers()[0] != e.srv.RPCAddr() {
		t.Errorf("servers = %v, want [%s]", resp.GetServers(), e.srv.RPCAddr())
	}
	if got := e.node(n.GetId()); got.GetCreateIndex() != resp.GetIndex() {
		t.Errorf("create index %d, response index %d", got.GetCreateIndex(), resp.GetIndex())
	}
}

func TestRegisterNeverChangesStatus(t *testing.T) {
	t.Parallel()
	for _, status := range []droverv1.NodeStatus{initializing, ready, down, disconnected} {
		t.Run(status.String(), func(t *testing.T) {
			e := newEnv(t)
			n := e.register()
			if status != initializing {
				e.setStatus(n, status)
			}
			changed := n.CloneVT()
			changed.Attributes["rack"] = "r9"
			changed.Status = ready
			resp, err := e.nodes.Register(e.ctx(), &droverv1.RegisterNodeRequest{Node: changed})
			if err != nil {
				t.Fatal(err)
			}
			got := e.node(n.GetId())
			if resp.GetStatus() != status || got.GetStatus() != status {
				t.Errorf("after re-registering: response %s, stored %s, want %s", resp.GetStatus(), got.GetStatus(), status)
			}
			if got.GetAttributes()["rack"] != "r9" {
				t.Errorf("description was not updated")
			}
		})
	}
}

func TestRegisterUnchangedWritesNothing(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	n := e.register()
	before := e.latestIndex()
	resp, err := e.nodes.Register(e.ctx(), &droverv1.RegisterNodeRequest{Node: n.CloneVT()})
	if err != nil {
		t.Fatal(err)
	}
	if e.latestIndex() != before {
		t.Errorf("re-registering an unchanged node wrote to raft (%d -> %d)", before, e.latestIndex())
	}
	if resp.GetIndex() != e.node(n.GetId()).GetModifyIndex() {
		t.Errorf("response index %d, want the node's modify index", resp.GetIndex())
	}
}

func TestRegisterRejections(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	known := e.register()
	tests := []struct {
		name  string
		edit  func(n *droverv1.Node)
		code  codes.Code
		field string
	}{
		{"other secret", func(n *droverv1.Node) { n.Id, n.SecretId = known.GetId(), mock.ID() }, codes.PermissionDenied, ""},
		{"id not a uuid", func(n *droverv1.Node) { n.Id = "node-1" }, codes.InvalidArgument, "node.id"},
		{"id uppercase", func(n *droverv1.Node) { n.Id = strings.ToUpper(n.Id) }, codes.InvalidArgument, "node.id"},
		{"no secret", func(n *droverv1.Node) { n.SecretId = "" }, codes.InvalidArgument, "node.secret_id"},
		{"no name", func(n *droverv1.Node) { n.Name = "" }, codes.InvalidArgument, "node.name"},
		{"bad datacenter", func(n *droverv1.Node) { n.Datacenter = "dc 1" }, codes.InvalidArgument, "node.datacenter"},
		{"bad class", func(n *droverv1.Node) { n.NodeClass = "-x" }, codes.InvalidArgument, "node.node_class"},
		{"no resources", func(n *droverv1.Node) { n.Resources = nil }, codes.InvalidArgument, "node.resources"},
		{"no cpu", func(n *droverv1.Node) { n.Resources.CpuMhz = 0 }, codes.InvalidArgument, "node.resources.cpu_mhz"},
		{"negative memory", func(n *droverv1.Node) { n.Resources.MemoryMb = -1 }, codes.InvalidArgument, "node.resources.memory_mb"},
		{"inverted port range", func(n *droverv1.Node) { n.Resources.MinDynamicPort, n.Resources.MaxDynamicPort = 30000, 20000 }, codes.InvalidArgument, "node.resources.min_dynamic_port"},
		{"reserved beyond capacity", func(n *droverv1.Node) { n.Reserved.CpuMhz = 99999 }, codes.InvalidArgument, "node.reserved.cpu_mhz"},
		{"reserved port out of range", func(n *droverv1.Node) {
			n.Reserved.Ports = []*droverv1.PortRange{{First: 22, Last: 70000}}
		}, codes.InvalidArgument, "node.reserved.ports[0].last"},
		{"empty attribute key", func(n *droverv1.Node) { n.Attributes[""] = "x" }, codes.InvalidArgument, "node.attributes"},
		{"NUL in name", func(n *droverv1.Node) { n.Name = "a\x00b" }, codes.InvalidArgument, "node.name"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			n := mock.Node()
			tt.edit(n)
			before := e.latestIndex()
			_, err := e.nodes.Register(e.ctx(), &droverv1.RegisterNodeRequest{Node: n})
			if tt.field != "" {
				wantInvalid(t, err, tt.field)
			} else {
				wantCode(t, err, tt.code)
			}
			if e.latestIndex() != before {
				t.Errorf("a refused registration wrote to raft")
			}
		})
	}
	t.Run("no node", func(t *testing.T) {
		_, err := e.nodes.Register(e.ctx(), &droverv1.RegisterNodeRequest{})
		wantInvalid(t, err, "node")
	})
}

func TestHeartbeatRejections(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	n := e.register()
	tests := []struct {
		name  string
		req   *droverv1.UpdateNodeStatusRequest
		code  codes.Code
		field string
	}{
		{"unknown node", &droverv1.UpdateNodeStatusRequest{NodeId: mock.ID(), SecretId: mock.ID(), Status: ready}, codes.NotFound, ""},
		{"wrong secret", &droverv1.UpdateNodeStatusRequest{NodeId: n.GetId(), SecretId: mock.ID(), Status: ready}, codes.PermissionDenied, ""},
		{"no status", &droverv1.UpdateNodeStatusRequest{NodeId: n.GetId(), SecretId: n.GetSecretId()}, codes.InvalidArgument, "status"},
		{"agent reports down", &droverv1.UpdateNodeStatusRequest{NodeId: n.GetId(), SecretId: n.GetSecretId(), Status: down}, codes.InvalidArgument, "status"},
		{"bad node id", &droverv1.UpdateNodeStatusRequest{NodeId: "x", SecretId: n.GetSecretId(), Status: ready}, codes.InvalidArgument, "node_id"},
		{"no secret", &droverv1.UpdateNodeStatusRequest{NodeId: n.GetId(), Status: ready}, codes.InvalidArgument, "secret_id"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			before := e.latestIndex()
			_, err := e.nodes.UpdateStatus(e.ctx(), tt.req)
			if tt.field != "" {
				wantInvalid(t, err, tt.field)
			} else {
				wantCode(t, err, tt.code)
			}
			if e.latestIndex() != before || e.node(n.GetId()).GetStatus() != initializing {
				t.Errorf("a refused heartbeat changed state")
			}
		})
	}
}

func TestHeartbeatOfIdleNode(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	n := e.register()
	first := e.heartbeat(n)
	if first.GetStatus() != ready || first.GetIndex() == 0 {
		t.Fatalf("first heartbeat: %s at %d, want ready with a write", first.GetStatus(), first.GetIndex())
	}
	before := e.latestIndex()
	second := e.heartbeat(n)
	if second.GetStatus() != ready || second.GetIndex() != 0 || e.latestIndex() != before {
		t.Errorf("steady heartbeat: %s at %d, raft %d -> %d; want ready and no write", second.GetStatus(), second.GetIndex(), before, e.latestIndex())
	}
	if ttl := second.GetHeartbeatTtl().AsDuration(); ttl < 10*time.Second {
		t.Errorf("TTL %s below the minimum", ttl)
	}
}

// TestHeartbeatGate walks a node through a missed heartbeat and back: it
// must not become ready again until it has reported its allocations after
// the missed heartbeat, whatever it calls in between.
func TestHeartbeatGate(t *testing.T) {
	t.Parallel()
	for _, missed := range []droverv1.NodeStatus{down, disconnected} {
		t.Run(missed.String(), func(t *testing.T) {
			e := newEnv(t)
			n := e.register()
			e.heartbeat(n)
			job := e.job(2)
			allocs := e.place(n, job, 2)
			if _, err := e.report(n, running, allocs[0].GetId(), allocs[1].GetId()); err != nil {
				t.Fatal(err)
			}
			e.setStatus(n, missed)

			// Reports are refused until the node heartbeats.
			_, err := e.report(n, running, allocs[0].GetId())
			wantCode(t, err, codes.FailedPrecondition)

			back := e.heartbeat(n)
			if back.GetStatus() != initializing {
				t.Fatalf("first heartbeat after %s: %s, want initializing", missed, back.GetStatus())
			}
			if wantEvals := missed == disconnected; (len(back.GetEvalIds()) > 0) != wantEvals {
				t.Errorf("leaving %s created evals %v", missed, back.GetEvalIds())
			}
			// Registering again or heartbeating again changes nothing.
			if _, err := e.nodes.Register(e.ctx(), &droverv1.RegisterNodeRequest{Node: n.CloneVT()}); err != nil {
				t.Fatal(err)
			}
			if again := e.heartbeat(n); again.GetStatus() != initializing || again.GetIndex() != 0 {
				t.Fatalf("heartbeat before reporting: %s at %d, want initializing and no write", again.GetStatus(), again.GetIndex())
			}
			if _, err := e.report(n, running, allocs[0].GetId(), allocs[1].GetId()); err != nil {
				t.Fatal(err)
			}
			stored := e.node(n.GetId())
			if stored.GetLastAllocUpdateIndex() <= stored.GetLastMissedHeartbeatIndex() {
				t.Fatalf("report index %d not after missed heartbeat %d", stored.GetLastAllocUpdateIndex(), stored.GetLastMissedHeartbeatIndex())
			}
			final := e.heartbeat(n)
			if final.GetStatus() != ready || len(final.GetEvalIds()) != 1 {
				t.Fatalf("heartbeat after reporting: %s with evals %v, want ready with one eval", final.GetStatus(), final.GetEvalIds())
			}
			ev := e.srv.State().Snapshot().EvalByID(final.GetEvalIds()[0])
			if ev.GetJobId() != job.GetId() || ev.GetTriggeredBy() != droverv1.EvalTrigger_EVAL_TRIGGER_NODE_UPDATE ||
				ev.GetNodeModifyIndex() != final.GetIndex() || ev.GetCreateIndex() != final.GetIndex() {
				t.Errorf("eval %+v: want a node-update eval of the job written with the status", ev)
			}
			if got := e.node(n.GetId()); got.GetLastMissedHeartbeatIndex() != 0 {
				t.Errorf("ready node keeps last missed heartbeat index %d", got.GetLastMissedHeartbeatIndex())
			}
		})
	}
}

func TestHeartbeatOfNewNodeWithStoppedAllocsIsNotGated(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	n := e.register()
	job := e.job(1)
	a := e.place(n, job, 1)[0]
	e.apply(droverv1.MessageTypePlanResult, &droverv1.PlanResultEntry{Stops: []*droverv1.AllocStop{{
		AllocId: a.GetId(), DesiredStatus: droverv1.AllocDesiredStatus_ALLOC_DESIRED_STATUS_STOP,
	}}})
	if got := e.heartbeat(n); got.GetStatus() != ready {
		t.Errorf("node whose only allocation is stopped: %s, want ready", got.GetStatus())
	}
}

// TestWritesWithoutLeaderAreUnavailable checks that a server with no
// cluster (not bootstrapped, so no leader) refuses writes with UNAVAILABLE
// and a retry hint, and writes nothing.
func TestWritesWithoutLeaderAreUnavailable(t *testing.T) {
	t.Parallel()
	cfg := server.DefaultConfig()
	cfg.DataDir = t.TempDir()
	cfg.RPCAddr, cfg.RaftAddr = "127.0.0.1:0", "127.0.0.1:0"
	cfg.Logger = slog.New(slog.DiscardHandler)
	srv, err := server.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = srv.Shutdown(context.Background()) })
	conn := testserver.Dial(t, srv.RPCAddr())
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	_, err = droverv1.NewNodeServiceClient(conn).Register(ctx, &droverv1.RegisterNodeRequest{Node: mock.Node()})
	wantCode(t, err, codes.Unavailable)
	if !retryInfo(err) {
		t.Errorf("UNAVAILABLE without a retry hint: %v", err)
	}
	if srv.State().LatestIndex() != 0 {
		t.Errorf("a refused write reached the state")
	}
}

// TestHeartbeatsShareEntries brings many registered nodes to ready at once,
// as a fleet coming up does: their status changes share raft entries
// instead of taking one each, and every node still ends ready.
func TestHeartbeatsShareEntries(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	const fleet = 200
	nodes := make([]*droverv1.Node, fleet)
	for i := range nodes {
		nodes[i] = e.register()
	}
	before := e.latestIndex()
	var wg sync.WaitGroup
	for _, n := range nodes {
		wg.Go(func() {
			resp, err := e.nodes.UpdateStatus(e.ctx(), &droverv1.UpdateNodeStatusRequest{
				NodeId: n.GetId(), SecretId: n.GetSecretId(), Status: droverv1.NodeStatus_NODE_STATUS_READY,
			})
			if err != nil || resp.GetStatus() != ready || resp.GetIndex() == 0 {
				t.Errorf("heartbeat of %s: %s at %d, %v", n.GetId(), resp.GetStatus(), resp.GetIndex(), err)
			}
		})
	}
	wg.Wait()
	for _, n := range nodes {
		if got := e.node(n.GetId()).GetStatus(); got != ready {
			t.Fatalf("node %s is %s after its heartbeat, want ready", n.GetId(), got)
		}
	}
	entries := e.latestIndex() - before
	t.Logf("%d nodes became ready in %d raft entries", fleet, entries)
	if entries >= fleet {
		t.Errorf("%d raft entries for %d status changes, want them shared", entries, fleet)
	}
}
