package cli

import (
	"bytes"
	"context"
	"net"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/durationpb"

	droverv1 "github.com/droverhq/drover/proto/drover/v1"
	"github.com/droverhq/drover/rpc"
)

// fakeNodes is a NodeService whose Get answers gets[i] to read i (the last
// one from then on), and which records what it was asked.
type fakeNodes struct {
	droverv1.UnimplementedNodeServiceServer

	gets        []*droverv1.GetNodeResponse
	eligibility *droverv1.UpdateNodeEligibilityResponse
	drain       *droverv1.UpdateNodeDrainResponse
	err         error // when set, the updates fail with it
	// hang makes a blocking read (min_index set) wait for the caller to
	// give up; blocked is closed when the first one arrives.
	hang      bool
	blocked   chan struct{}
	blockOnce sync.Once

	mu      sync.Mutex
	reads   []*droverv1.GetNodeRequest
	updates []*droverv1.UpdateNodeEligibilityRequest
	drains  []*droverv1.UpdateNodeDrainRequest
}

func (f *fakeNodes) Get(ctx context.Context, req *droverv1.GetNodeRequest) (*droverv1.GetNodeResponse, error) {
	f.mu.Lock()
	n := len(f.reads)
	f.reads = append(f.reads, req)
	f.mu.Unlock()
	if f.hang && req.GetQuery().GetMinIndex() > 0 {
		f.blockOnce.Do(func() { close(f.blocked) })
		<-ctx.Done()
		return nil, ctx.Err()
	}
	if len(f.gets) == 0 {
		return nil, status.Errorf(codes.NotFound, "node %q: not found", req.GetNodeId())
	}
	return f.gets[min(n, len(f.gets)-1)], nil
}

func (f *fakeNodes) UpdateEligibility(_ context.Context, req *droverv1.UpdateNodeEligibilityRequest) (*droverv1.UpdateNodeEligibilityResponse, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.updates = append(f.updates, req)
	return f.eligibility, f.err
}

func (f *fakeNodes) UpdateDrain(_ context.Context, req *droverv1.UpdateNodeDrainRequest) (*droverv1.UpdateNodeDrainResponse, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.drains = append(f.drains, req)
	return f.drain, f.err
}

func (f *fakeNodes) requests() (reads []*droverv1.GetNodeRequest, updates []*droverv1.UpdateNodeEligibilityRequest, drains []*droverv1.UpdateNodeDrainRequest) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append(reads, f.reads...), append(updates, f.updates...), append(drains, f.drains...)
}

// startNodes serves f on a loopback port until the test ends.
func startNodes(t *testing.T, f *fakeNodes) string {
	t.Helper()
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := grpc.NewServer(grpc.ForceServerCodecV2(rpc.Codec{}))
	droverv1.RegisterNodeServiceServer(srv, f)
	done := make(chan struct{})
	go func() {
		defer close(done)
		_ = srv.Serve(lis)
	}()
	t.Cleanup(func() {
		srv.Stop()
		<-done
	})
	return lis.Addr().String()
}

// nodeRead is a Get answer for node nodeID1 at index, draining when ds is
// set, with running allocations still running and done ones complete.
func nodeRead(index uint64, ds *droverv1.DrainStrategy, running, done int, events ...*droverv1.NodeEvent) *droverv1.GetNodeResponse {
	resp := &droverv1.GetNodeResponse{
		Node: &droverv1.Node{Id: nodeID1, Name: "web-1", DrainStrategy: ds, Events: events, ModifyIndex: index},
		Meta: &droverv1.QueryMeta{Index: index},
	}
	add := func(n int, st droverv1.AllocClientStatus) {
		for range n {
			resp.Allocs = append(resp.Allocs, &droverv1.Allocation{NodeId: nodeID1, ClientStatus: st})
		}
	}
	add(running, droverv1.AllocClientStatus_ALLOC_CLIENT_STATUS_RUNNING)
	add(done, droverv1.AllocClientStatus_ALLOC_CLIENT_STATUS_COMPLETE)
	return resp
}

func TestNodeDrainFollows(t *testing.T) {
	t.Setenv(addrEnv, "")
	draining := &droverv1.DrainStrategy{}
	completeAt := func(index uint64) *droverv1.NodeEvent {
		return &droverv1.NodeEvent{Subsystem: droverv1.NodeEventSubsystemDrain, Message: droverv1.NodeEventDrainComplete, CreateIndex: index}
	}
	const started = `Node "` + nodeID1 + `" drain strategy set
Evaluation ID: ` + evalID1 + `
==> Monitoring the drain of node "a1b2c3d4"; Ctrl-C stops monitoring, not the drain
`
	tests := []struct {
		name       string
		gets       []*droverv1.GetNodeResponse
		wantOut    string
		wantStderr string
	}{
		{
			name: "to completion",
			gets: []*droverv1.GetNodeResponse{
				nodeRead(39, nil, 3, 0), // resolving the prefix, before the drain
				nodeRead(40, draining, 3, 0),
				nodeRead(41, draining, 3, 0),
				nodeRead(43, draining, 1, 2),
				nodeRead(44, draining, 0, 3),
				nodeRead(45, nil, 0, 3, completeAt(45)),
			},
			wantOut: started + `==> 3 allocations still running on the node
==> 1 allocation still running on the node
==> 0 allocations still running on the node
Node "` + nodeID1 + `" drain complete
`,
		},
		{
			name: "complete before the first read",
			gets: []*droverv1.GetNodeResponse{nodeRead(39, nil, 0, 0), nodeRead(40, nil, 0, 0, completeAt(40))},
			wantOut: started + `Node "` + nodeID1 + `" drain complete
`,
		},
		{
			name: "ended by someone else",
			gets: []*droverv1.GetNodeResponse{
				nodeRead(39, nil, 2, 0),
				nodeRead(40, draining, 2, 0),
				nodeRead(46, nil, 2, 0, completeAt(12)), // an earlier drain's
			},
			wantOut: started + "==> 2 allocations still running on the node\n",
			wantStderr: "Error following the drain of node " + nodeID1 + ": the drain ended before it completed\n" +
				"`drover node status a1b2c3d4` shows the node's events.\n",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			fake := &fakeNodes{gets: tt.gets, drain: &droverv1.UpdateNodeDrainResponse{Index: 40, EvalIds: []string{evalID1}}}
			addr := startNodes(t, fake)
			stdout, stderr, err := run(t, withAddr(addr, []string{"node", "drain", "-enable", "-deadline", "1h"}, "a1b2")...)
			if tt.wantStderr == "" && err != nil {
				t.Fatalf("error %v; stderr:\n%s", err, stderr)
			}
			if tt.wantStderr != "" && (err == nil || !Reported(err)) {
				t.Fatalf("error %v, want a reported one", err)
			}
			if stdout != tt.wantOut {
				t.Errorf("stdout:\n%s\nwant:\n%s", stdout, tt.wantOut)
			}
			if stderr != tt.wantStderr {
				t.Errorf("stderr:\n%q\nwant:\n%q", stderr, tt.wantStderr)
			}
			reads, _, drains := fake.requests()
			want := &droverv1.UpdateNodeDrainRequest{NodeId: nodeID1, Enable: true, Deadline: durationpb.New(time.Hour)}
			if len(drains) != 1 || !drains[0].EqualVT(want) {
				t.Errorf("drain requests %v, want %v", drains, want)
			}
			if reads[0].GetNodeId() != "a1b2" {
				t.Errorf("resolved %q, want the prefix given", reads[0].GetNodeId())
			}
			// Every follow read is by full id; after the first it blocks on
			// the index the previous one returned.
			for i, r := range reads[1:] {
				wantIndex := uint64(0)
				if i > 0 {
					wantIndex = tt.gets[i].GetMeta().GetIndex()
				}
				if r.GetNodeId() != nodeID1 || r.GetQuery().GetMinIndex() != wantIndex || r.GetQuery().GetMaxWait().AsDuration() <= 0 {
					t.Errorf("follow read %d: %v, want node %s with min_index %d and a max_wait", i, r, nodeID1, wantIndex)
				}
			}
		})
	}
}

func TestNodeDrainEndsFollowing(t *testing.T) {
	t.Setenv(addrEnv, "")
	const started = `Node "` + nodeID1 + `" drain strategy set
==> Monitoring the drain of node "a1b2c3d4"; Ctrl-C stops monitoring, not the drain
==> 1 allocation still running on the node
`
	const carriesOn = "The drain carries on: `drover node status a1b2c3d4` shows how it goes.\n"
	newFake := func() *fakeNodes {
		return &fakeNodes{
			gets:    []*droverv1.GetNodeResponse{nodeRead(40, &droverv1.DrainStrategy{}, 1, 0)},
			drain:   &droverv1.UpdateNodeDrainResponse{Index: 40},
			hang:    true,
			blocked: make(chan struct{}),
		}
	}

	t.Run("-timeout", func(t *testing.T) {
		addr := startNodes(t, newFake())
		stdout, stderr, err := run(t, "node", "drain", "-enable", "-address", addr, "-timeout", "300ms", nodeID1)
		if err == nil || !Reported(err) {
			t.Fatalf("error %v, want a reported one", err)
		}
		if stdout != started {
			t.Errorf("stdout:\n%s\nwant:\n%s", stdout, started)
		}
		want := "Error following the drain of node " + nodeID1 + ": still draining after -timeout 300ms\n" + carriesOn
		if stderr != want {
			t.Errorf("stderr:\n%q\nwant:\n%q", stderr, want)
		}
	})

	t.Run("Ctrl-C", func(t *testing.T) {
		fake := newFake()
		addr := startNodes(t, fake)
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		// The follow is diverting SIGINT from its first read on, so the
		// signal reaches it rather than ending the test.
		go func() {
			select {
			case <-fake.blocked:
				_ = syscall.Kill(syscall.Getpid(), syscall.SIGINT)
			case <-ctx.Done():
			}
		}()
		var stdout, stderr bytes.Buffer
		err := Run(ctx, Root(&stdout, &stderr), []string{"node", "drain", "-enable", "-address", addr, nodeID1})
		if err == nil || !Reported(err) {
			t.Fatalf("error %v, want a reported one", err)
		}
		if stdout.String() != started {
			t.Errorf("stdout:\n%s\nwant:\n%s", stdout.String(), started)
		}
		want := "Error following the drain of node " + nodeID1 + ": interrupt signal received\n" + carriesOn
		if stderr.String() != want {
			t.Errorf("stderr:\n%q\nwant:\n%q", stderr.String(), want)
		}
	})
}

func TestNodeWritesWithoutFollowing(t *testing.T) {
	t.Setenv(addrEnv, "")
	tests := []struct {
		name        string
		args        []string
		fake        *fakeNodes
		wantOut     string
		wantDrain   *droverv1.UpdateNodeDrainRequest
		wantElig    *droverv1.UpdateNodeEligibilityRequest
		wantStderr  string
		wantErrCode codes.Code
	}{
		{
			name:      "drain -enable -detach",
			args:      []string{"node", "drain", "-enable", "-detach", "-ignore-system", "a1b2"},
			fake:      &fakeNodes{drain: &droverv1.UpdateNodeDrainResponse{Index: 40, EvalIds: []string{evalID1}}},
			wantOut:   `Node "` + nodeID1 + `" drain strategy set` + "\nEvaluation ID: " + evalID1 + "\n",
			wantDrain: &droverv1.UpdateNodeDrainRequest{NodeId: nodeID1, Enable: true, IgnoreSystemJobs: true, Deadline: durationpb.New(time.Hour)},
		},
		{
			name:      "drain -disable -keep-ineligible",
			args:      []string{"node", "drain", "-disable", "-keep-ineligible", "a1b2"},
			fake:      &fakeNodes{drain: &droverv1.UpdateNodeDrainResponse{Index: 41}},
			wantOut:   `Node "` + nodeID1 + `" drain strategy unset` + "\n",
			wantDrain: &droverv1.UpdateNodeDrainRequest{NodeId: nodeID1},
		},
		{
			name:     "eligibility -disable",
			args:     []string{"node", "eligibility", "-disable", "a1b2"},
			fake:     &fakeNodes{eligibility: &droverv1.UpdateNodeEligibilityResponse{Index: 42}},
			wantOut:  `Node "` + nodeID1 + `" scheduling eligibility set: ineligible for scheduling` + "\n",
			wantElig: &droverv1.UpdateNodeEligibilityRequest{NodeId: nodeID1, Eligibility: ineligible},
		},
		{
			name:     "eligibility -enable -json",
			args:     []string{"node", "eligibility", "-enable", "-json", "a1b2"},
			fake:     &fakeNodes{eligibility: &droverv1.UpdateNodeEligibilityResponse{Index: 43, EvalIds: []string{evalID1}}},
			wantOut:  "{\n  \"index\": \"43\",\n  \"eval_ids\": [\n    \"" + evalID1 + "\"\n  ]\n}\n",
			wantElig: &droverv1.UpdateNodeEligibilityRequest{NodeId: nodeID1, Eligibility: eligible},
		},
		{
			name:     "eligibility -enable while draining",
			args:     []string{"node", "eligibility", "-enable", "a1b2"},
			fake:     &fakeNodes{err: status.Error(codes.FailedPrecondition, "node is draining")},
			wantElig: &droverv1.UpdateNodeEligibilityRequest{NodeId: nodeID1, Eligibility: eligible},
			wantStderr: `Error setting the eligibility of node "` + nodeID1 + `": node is draining (FailedPrecondition)` + "\n" +
				"`drover node drain -disable a1b2c3d4` ends the drain and makes the node eligible.\n",
			wantErrCode: codes.FailedPrecondition,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			fake := tt.fake
			fake.gets = []*droverv1.GetNodeResponse{nodeRead(39, nil, 0, 0)}
			addr := startNodes(t, fake)
			stdout, stderr, err := run(t, append(withAddr(addr, tt.args[:2]), tt.args[2:]...)...)
			if tt.wantErrCode != codes.OK {
				if !Reported(err) || status.Code(err) != tt.wantErrCode {
					t.Errorf("error %v, want a reported %s", err, tt.wantErrCode)
				}
			} else if err != nil {
				t.Fatalf("error %v; stderr:\n%s", err, stderr)
			}
			if stdout != tt.wantOut {
				t.Errorf("stdout:\n%s\nwant:\n%s", stdout, tt.wantOut)
			}
			if stderr != tt.wantStderr {
				t.Errorf("stderr:\n%q\nwant:\n%q", stderr, tt.wantStderr)
			}
			reads, updates, drains := fake.requests()
			if len(reads) != 1 {
				t.Errorf("%d reads, want 1 to resolve the id", len(reads))
			}
			if (tt.wantDrain == nil) != (len(drains) == 0) || (tt.wantDrain != nil && (len(drains) != 1 || !drains[0].EqualVT(tt.wantDrain))) {
				t.Errorf("drain requests %v, want %v", drains, tt.wantDrain)
			}
			if (tt.wantElig == nil) != (len(updates) == 0) || (tt.wantElig != nil && (len(updates) != 1 || !updates[0].EqualVT(tt.wantElig))) {
				t.Errorf("eligibility requests %v, want %v", updates, tt.wantElig)
			}
		})
	}
}

func TestNodeUsageErrors(t *testing.T) {
	t.Setenv(addrEnv, "")
	fake := &fakeNodes{}
	addr := startNodes(t, fake)
	tests := []struct {
		name    string
		args    []string
		wantErr string
	}{
		{"eligibility without -enable or -disable", []string{"node", "eligibility", nodeID1}, "give exactly one of -enable and -disable"},
		{"eligibility with both", []string{"node", "eligibility", "-enable", "-disable", nodeID1}, "give exactly one of -enable and -disable"},
		{"eligibility without an id", []string{"node", "eligibility", "-enable"}, "give exactly one node id"},
		{"eligibility with two ids", []string{"node", "eligibility", "-enable", nodeID1, nodeID2}, "give exactly one node id"},
		{"drain without -enable or -disable", []string{"node", "drain", nodeID1}, "give exactly one of -enable and -disable"},
		{"drain with both", []string{"node", "drain", "-enable", "-disable", nodeID1}, "give exactly one of -enable and -disable"},
		{"drain without an id", []string{"node", "drain", "-enable"}, "give exactly one node id"},
		{"drain with a negative deadline", []string{"node", "drain", "-enable", "-deadline", "-5m", nodeID1}, `invalid value "-5m" for flag -deadline: must be positive`},
		{"drain with a zero deadline", []string{"node", "drain", "-enable", "-deadline", "0s", nodeID1}, `invalid value "0s" for flag -deadline: must be positive`},
		{"drain with a bad deadline", []string{"node", "drain", "-enable", "-deadline", "soon", nodeID1}, `invalid value "soon" for flag -deadline`},
		{"drain -disable with a deadline", []string{"node", "drain", "-disable", "-deadline", "1h", nodeID1}, "-deadline, -no-deadline and -force go with -enable"},
		{"drain -force with a deadline", []string{"node", "drain", "-enable", "-force", "-deadline", "1h", nodeID1}, "give at most one of -deadline, -no-deadline and -force"},
		{"status with two ids", []string{"node", "status", nodeID1, nodeID2}, "give at most one node id, not 2"},
		{"system gc with an argument", []string{"system", "gc", "now"}, "unexpected arguments: now"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			args := append(withAddr(addr, tt.args[:2]), tt.args[2:]...)
			stdout, _, err := run(t, args...)
			if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
				t.Fatalf("error %v, want it to mention %q", err, tt.wantErr)
			}
			if Reported(err) {
				t.Errorf("usage error %v counted as reported; main should print it", err)
			}
			if stdout != "" {
				t.Errorf("stdout: %q", stdout)
			}
		})
	}
	if reads, updates, drains := fake.requests(); len(reads)+len(updates)+len(drains) != 0 {
		t.Errorf("the server was called: %d reads, %d eligibility updates, %d drains", len(reads), len(updates), len(drains))
	}
}
