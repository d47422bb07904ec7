package server_test

import (
	"bytes"
	"context"
	"errors"
	"io"
	"log/slog"
	"maps"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/hashicorp/raft"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/protobuf/proto"

	"github.com/droverhq/drover/fsm"
	"github.com/droverhq/drover/fsm/events"
	"github.com/droverhq/drover/fsm/state"
	"github.com/droverhq/drover/internal/mock"
	"github.com/droverhq/drover/internal/testserver"
	droverv1 "github.com/droverhq/drover/proto/drover/v1"
	"github.com/droverhq/drover/server"
)

// bad is not valid UTF-8; repaired it reads "a\uFFFDb".
const (
	bad      = "a\x80b"
	repaired = "a\uFFFDb"
)

func noWorkers(c *server.Config) { c.Scheduler.NumWorkers = 0 }

// TestApplyRefusesNonPortableEntries: entries the server builds itself
// pass no interceptor, so Apply is the last gate before the log. It refuses
// an entry holding invalid UTF-8 with a violation naming the field, and
// writes nothing.
func TestApplyRefusesNonPortableEntries(t *testing.T) {
	srv := testserver.Start(t, noWorkers)
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	badNode := mock.Node()
	badNode.Attributes["rack"] = bad
	job := mock.Job(1)
	plan := &droverv1.PlanResultEntry{}
	for i := range 1000 {
		plan.Allocations = append(plan.Allocations, mock.Alloc(mock.Node(), job, i))
	}
	plan.Allocations[700].ClientDescription = bad
	tests := []struct {
		name    string
		msgType droverv1.MessageType
		entry   interface {
			proto.Message
			SizeVT() int
			MarshalToSizedBufferVT([]byte) (int, error)
		}
		field string
	}{
		{"node attribute", droverv1.MessageTypeNodeRegister,
			&droverv1.NodeRegisterEntry{Nodes: []*droverv1.Node{mock.Node(), badNode}}, `nodes[1].attributes["rack"]`},
		{"allocation in a large plan", droverv1.MessageTypePlanResult, plan, "allocations[700].client_description"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			before := srv.State().LatestIndex()
			_, _, err := srv.Apply(ctx, tt.msgType, tt.entry)
			var verr *droverv1.ValidationError
			if !errors.As(err, &verr) || len(verr.Violations) != 1 || verr.Violations[0].Field != tt.field {
				t.Fatalf("Apply = %v, want a violation of %s", err, tt.field)
			}
			if got := srv.State().LatestIndex(); got != before {
				t.Errorf("the refused entry was applied: index %d -> %d", before, got)
			}
		})
	}
}

// TestOldDataDirWithInvalidUTF8 builds the data dirs of a cluster that older
// servers wrote: raft entries and a snapshot holding strings that are not
// valid UTF-8, put into the log past the checks of Apply. After every server
// restarts on its data dir, each one answers StateDigest, the digests agree,
// and Node.List and Job.List decode with grpc's standard proto codec, as
// grpcurl decodes them.
func TestOldDataDirWithInvalidUTF8(t *testing.T) {
	logs := map[string]*syncBuffer{"s1": {}, "s2": {}, "s3": {}}
	t.Cleanup(func() {
		if t.Failed() {
			for id, l := range logs {
				t.Logf("log of %s:\n%s", id, l)
			}
		}
	})
	servers := testserver.StartCluster(t, 3, noWorkers, func(c *server.Config) {
		c.Logger = slog.New(slog.NewTextHandler(logs[c.ServerID], &slog.HandlerOptions{Level: slog.LevelInfo}))
	})
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	defer cancel()
	leader := waitLeader(t, servers)
	lr := leader.RaftForTest()

	// Entries before the snapshot, then the snapshot, then entries after
	// it, which stay in the log.
	nodes := []*droverv1.Node{badNode("before"), badNode("in-snapshot"), badNode("after")}
	jobs := []*droverv1.Job{badJob(), badJob(), badJob()}
	proposeRaw(t, lr, nodes[0], jobs[0])
	restoreRaw(t, lr, leader, nodes[1], jobs[1])
	proposeRaw(t, lr, nodes[2], jobs[2])
	waitApplied(ctx, t, servers, leader.State().LatestIndex())

	for i, s := range servers {
		logs[s.ID()].Reset()
		servers[i] = s.Restart(t)
	}
	leader = waitLeader(t, servers)
	waitApplied(ctx, t, servers, leader.State().LatestIndex())
	for _, s := range servers {
		l := logs[s.ID()].String()
		if !strings.Contains(l, "repaired snapshot records") || strings.Count(l, "repaired a raft entry") < 2 {
			t.Errorf("server %s did not repair its snapshot and the 2 entries after it on restart", s.ID())
		}
	}
	checkDigestsAgree(ctx, t, servers)
	for _, s := range servers {
		conn := dialStandard(t, s.RPCAddr())
		stale := &droverv1.QueryOptions{AllowStale: true}
		nl, err := droverv1.NewNodeServiceClient(conn).List(ctx, &droverv1.ListNodesRequest{Query: stale})
		if err != nil {
			t.Fatalf("%s: Node.List with the standard codec: %v", s.ID(), err)
		}
		jl, err := droverv1.NewJobServiceClient(conn).List(ctx, &droverv1.ListJobsRequest{Query: stale})
		if err != nil {
			t.Fatalf("%s: Job.List with the standard codec: %v", s.ID(), err)
		}
		for _, m := range []proto.Message{nl, jl} {
			if _, err := proto.Marshal(m); err != nil {
				t.Errorf("%s: proto.Marshal(%T): %v", s.ID(), m, err)
			}
		}
		names := map[string]bool{}
		for _, n := range nl.GetNodes() {
			names[n.GetName()] = true
		}
		for _, n := range nodes {
			if want := strings.ReplaceAll(n.GetName(), bad, repaired); !names[want] {
				t.Errorf("%s: no node named %q; nodes %v", s.ID(), want, names)
			}
		}
		owners := 0
		for _, j := range jl.GetJobs() {
			if j.GetMeta()["owner"] == repaired {
				owners++
			}
		}
		if owners != len(jobs) {
			t.Errorf("%s: %d jobs with meta owner %q, want %d", s.ID(), owners, repaired, len(jobs))
		}
	}
}

func badNode(name string) *droverv1.Node {
	n := mock.Node()
	n.Name = name + "-" + bad
	n.Attributes[bad] = "x"
	n.Attributes["rack"] = bad
	return n
}

func badJob() *droverv1.Job {
	j := mock.Job(1)
	j.Meta = map[string]string{"owner": bad}
	return j
}

// proposeRaw writes a node and a job through raft directly, as an older
// server's Apply did, without its checks.
func proposeRaw(t *testing.T, r *raft.Raft, n *droverv1.Node, j *droverv1.Job) {
	t.Helper()
	for _, e := range []struct {
		t droverv1.MessageType
		m fsm.Marshaler
	}{
		{droverv1.MessageTypeNodeRegister, &droverv1.NodeRegisterEntry{Nodes: []*droverv1.Node{n.CloneVT()}, RegisteredAt: 1}},
		{droverv1.MessageTypeJobRegister, &droverv1.JobRegisterEntry{Job: j.CloneVT(), Eval: mock.Eval(j, droverv1.EvalTrigger_EVAL_TRIGGER_JOB_REGISTER)}},
	} {
		data, err := fsm.Encode(e.t, e.m)
		if err != nil {
			t.Fatal(err)
		}
		if err := r.Apply(data, 30*time.Second).Error(); err != nil {
			t.Fatalf("propose %s: %v", e.t, err)
		}
	}
}

// restoreRaw makes the leader take a snapshot an older server could have
// written: its current state plus a node and a job stored as they came.
// raft keeps the snapshot's bytes as they are, sends them to the followers,
// and every server restores from them when it restarts.
func restoreRaw(t *testing.T, r *raft.Raft, leader *testserver.Server, n *droverv1.Node, j *droverv1.Job) {
	t.Helper()
	var current bytes.Buffer
	live := leader.State().Snapshot()
	if err := fsm.WriteSnapshot(&current, live, live.Index()); err != nil {
		t.Fatal(err)
	}
	st, err := state.NewStateStore()
	if err != nil {
		t.Fatal(err)
	}
	broker := events.NewBroker(events.Config{})
	defer broker.Close()
	if err := fsm.New(st, broker, slog.New(slog.DiscardHandler)).Restore(io.NopCloser(&current)); err != nil {
		t.Fatal(err)
	}
	index := live.Index() + 2
	if _, _, err := st.UpsertNodes(index-1, &droverv1.NodeRegisterEntry{Nodes: []*droverv1.Node{n.CloneVT()}, RegisteredAt: 1}); err != nil {
		t.Fatal(err)
	}
	if _, _, err := st.UpsertJob(index, &droverv1.JobRegisterEntry{Job: j.CloneVT(), Eval: mock.Eval(j, droverv1.EvalTrigger_EVAL_TRIGGER_JOB_REGISTER)}); err != nil {
		t.Fatal(err)
	}
	var old bytes.Buffer
	if err := fsm.WriteSnapshot(&old, st.Snapshot(), index); err != nil {
		t.Fatal(err)
	}
	meta := &raft.SnapshotMeta{Version: raft.SnapshotVersionMax, Index: index, Size: int64(old.Len())}
	if err := r.Restore(meta, &old, 30*time.Second); err != nil {
		t.Fatalf("restore the old snapshot: %v", err)
	}
}

// waitApplied waits until every server's state has reached index.
func waitApplied(ctx context.Context, t *testing.T, servers []*testserver.Server, index uint64) {
	t.Helper()
	for _, s := range servers {
		if _, err := s.State().SnapshotMinIndex(ctx, index); err != nil {
			t.Fatalf("%s did not reach index %d: %v", s.ID(), index, err)
		}
	}
}

// checkDigestsAgree asks every server for its state digest with the
// standard codec and compares those taken at the same index. The leader may
// write in between (a heartbeat timer); then it waits for every server to
// catch up and asks again.
func checkDigestsAgree(ctx context.Context, t *testing.T, servers []*testserver.Server) {
	t.Helper()
	for attempt := 0; ; attempt++ {
		var digests []*droverv1.StateDigestResponse
		highest := uint64(0)
		for _, s := range servers {
			d, err := droverv1.NewOperatorServiceClient(dialStandard(t, s.RPCAddr())).StateDigest(ctx, &droverv1.StateDigestRequest{})
			if err != nil {
				t.Fatalf("%s: StateDigest with the standard codec: %v", s.ID(), err)
			}
			digests = append(digests, d)
			highest = max(highest, d.GetIndex())
		}
		same := true
		for _, d := range digests[1:] {
			same = same && d.GetIndex() == digests[0].GetIndex()
		}
		if same {
			for i, d := range digests[1:] {
				if !maps.Equal(d.GetTables(), digests[0].GetTables()) {
					t.Errorf("%s and %s differ at index %d:\n%v\n%v", servers[0].ID(), servers[i+1].ID(), d.GetIndex(), digests[0].GetTables(), d.GetTables())
				}
			}
			return
		}
		if attempt == 10 {
			t.Fatalf("servers kept answering digests at different indexes")
		}
		waitApplied(ctx, t, servers, highest)
	}
}

// dialStandard connects with grpc's standard proto codec, which checks
// UTF-8 as every reflection-based client (grpcurl) does.
func dialStandard(t *testing.T, addr string) *grpc.ClientConn {
	t.Helper()
	conn, err := grpc.NewClient(addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = conn.Close() })
	return conn
}

// syncBuffer is a log destination shared by a server's goroutines.
type syncBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

func (b *syncBuffer) Reset() {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.buf.Reset()
}
