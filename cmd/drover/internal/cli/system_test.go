package cli

import (
	"context"
	"net"
	"testing"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	droverv1 "github.com/droverhq/drover/proto/drover/v1"
	"github.com/droverhq/drover/rpc"
)

func TestGCSummary(t *testing.T) {
	tests := []struct {
		resp *droverv1.GarbageCollectResponse
		want string
	}{
		{&droverv1.GarbageCollectResponse{Nodes: 2, Allocs: 40, Evals: 12, Jobs: 1, JobVersions: 3, Entries: 1},
			"Garbage collection deleted 2 nodes, 40 allocations, 12 evaluations, 1 job and 3 job versions in 1 raft entry"},
		{&droverv1.GarbageCollectResponse{Nodes: 1, Allocs: 1, Evals: 1, Jobs: 0, JobVersions: 1, Entries: 3},
			"Garbage collection deleted 1 node, 1 allocation, 1 evaluation, 0 jobs and 1 job version in 3 raft entries"},
		{&droverv1.GarbageCollectResponse{}, "Garbage collection found nothing to delete"},
	}
	for _, tt := range tests {
		if got := gcSummary(tt.resp); got != tt.want {
			t.Errorf("gcSummary(%v) = %q, want %q", tt.resp, got, tt.want)
		}
	}
}

// fakeGC is an OperatorService that answers GarbageCollect with resp, or
// fails with err.
type fakeGC struct {
	droverv1.UnimplementedOperatorServiceServer
	resp *droverv1.GarbageCollectResponse
	err  error
}

func (f *fakeGC) GarbageCollect(context.Context, *droverv1.GarbageCollectRequest) (*droverv1.GarbageCollectResponse, error) {
	return f.resp, f.err
}

func startGC(t *testing.T, f *fakeGC) string {
	t.Helper()
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := grpc.NewServer(grpc.ForceServerCodecV2(rpc.Codec{}))
	droverv1.RegisterOperatorServiceServer(srv, f)
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

func TestSystemGC(t *testing.T) {
	t.Setenv(addrEnv, "")
	counts := &droverv1.GarbageCollectResponse{Nodes: 2, Allocs: 40, Evals: 12, Jobs: 1, JobVersions: 3, Entries: 1}
	tests := []struct {
		name       string
		fake       *fakeGC
		flags      []string
		wantOut    string
		wantStderr string
	}{
		{name: "summary", fake: &fakeGC{resp: counts},
			wantOut: "Garbage collection deleted 2 nodes, 40 allocations, 12 evaluations, 1 job and 3 job versions in 1 raft entry\n"},
		{name: "-json", fake: &fakeGC{resp: counts}, flags: []string{"-json"},
			wantOut: `{
  "nodes": "2",
  "allocs": "40",
  "evals": "12",
  "jobs": "1",
  "job_versions": "3",
  "entries": "1"
}
`},
		{name: "no leader", fake: &fakeGC{err: status.Error(codes.Unavailable, "no cluster leader")},
			wantStderr: "Error collecting garbage: no cluster leader (Unavailable)\n"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			addr := startGC(t, tt.fake)
			stdout, stderr, err := run(t, withAddr(addr, []string{"system", "gc"}, tt.flags...)...)
			if tt.wantStderr != "" {
				if !Reported(err) {
					t.Errorf("error %v, want a reported one", err)
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
		})
	}
}
