package cli

import (
	"bytes"
	"context"
	"net"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/google/uuid"
	"google.golang.org/grpc"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/durationpb"

	droverv1 "github.com/droverhq/drover/proto/drover/v1"
	"github.com/droverhq/drover/rpc"
)

// fakeScheduling backs a JobService and an EvalService whose evaluation
// moves through the states in evals, one per read, and records what it was
// asked.
type fakeScheduling struct {
	evals  []*droverv1.Evaluation // read i answers evals[min(i, len-1)]
	allocs []*droverv1.Allocation
	// hang makes a blocking read (min_index set) wait for the caller to
	// give up; blocked is closed when the first one arrives.
	hang    bool
	blocked chan struct{}

	mu       sync.Mutex
	reads    []*droverv1.GetEvaluationRequest
	register []*droverv1.RegisterJobRequest
	stop     []*droverv1.DeregisterJobRequest
}

// fakeJobs is the JobService of a fakeScheduling.
type fakeJobs struct {
	droverv1.UnimplementedJobServiceServer
	*fakeScheduling
}

// fakeEvals is the EvalService of a fakeScheduling.
type fakeEvals struct {
	droverv1.UnimplementedEvalServiceServer
	*fakeScheduling
}

func (f fakeJobs) Register(_ context.Context, req *droverv1.RegisterJobRequest) (*droverv1.RegisterJobResponse, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.register = append(f.register, req)
	return &droverv1.RegisterJobResponse{EvalId: evalID1, JobVersion: 3, Index: 40}, nil
}

func (f fakeJobs) Deregister(_ context.Context, req *droverv1.DeregisterJobRequest) (*droverv1.DeregisterJobResponse, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.stop = append(f.stop, req)
	return &droverv1.DeregisterJobResponse{EvalId: evalID1, Index: 41}, nil
}

func (f fakeEvals) Get(ctx context.Context, req *droverv1.GetEvaluationRequest) (*droverv1.GetEvaluationResponse, error) {
	f.mu.Lock()
	n := len(f.reads)
	f.reads = append(f.reads, req)
	f.mu.Unlock()
	if f.hang && req.GetQuery().GetMinIndex() > 0 {
		if n == 1 {
			close(f.blocked)
		}
		<-ctx.Done()
		return nil, ctx.Err()
	}
	ev := f.evals[min(n, len(f.evals)-1)]
	return &droverv1.GetEvaluationResponse{Evaluation: ev, Meta: &droverv1.QueryMeta{Index: uint64(n + 1)}}, nil
}

func (f fakeJobs) Allocations(context.Context, *droverv1.ListJobAllocationsRequest) (*droverv1.ListJobAllocationsResponse, error) {
	return &droverv1.ListJobAllocationsResponse{Allocations: f.allocs}, nil
}

func (f *fakeScheduling) requests() (reads []*droverv1.GetEvaluationRequest, register []*droverv1.RegisterJobRequest, stop []*droverv1.DeregisterJobRequest) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append(reads, f.reads...), append(register, f.register...), append(stop, f.stop...)
}

// startScheduling serves f on a loopback port until the test ends.
func startScheduling(t *testing.T, f *fakeScheduling) string {
	t.Helper()
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := grpc.NewServer(grpc.ForceServerCodecV2(rpc.Codec{}))
	droverv1.RegisterJobServiceServer(srv, fakeJobs{fakeScheduling: f})
	droverv1.RegisterEvalServiceServer(srv, fakeEvals{fakeScheduling: f})
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

// writeJobFile writes a job file for jobs web (groups web and db) into a
// temporary directory.
func writeJobFile(t *testing.T, content string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "job.json")
	if err := os.WriteFile(path, []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

const twoGroupJob = `{"id": "web", "datacenters": ["dc1", "dc2"], "task_groups": [
	{"name": "web", "count": 5, "resources": {"cpu_mhz": 500, "memory_mb": 256}, "max_client_disconnect": "5m"},
	{"name": "db", "count": 1, "resources": {"cpu_mhz": 1000, "memory_mb": 1024}}]}`

// evalIn is evaluation evalID1 of job web in the given state.
func evalIn(status droverv1.EvalStatus, change func(*droverv1.Evaluation)) *droverv1.Evaluation {
	ev := &droverv1.Evaluation{Id: evalID1, JobId: "web", Type: droverv1.JobType_JOB_TYPE_SERVICE,
		TriggeredBy: droverv1.EvalTrigger_EVAL_TRIGGER_JOB_REGISTER, Status: status}
	if change != nil {
		change(ev)
	}
	return ev
}

func TestJobRunFollowsTheEvaluation(t *testing.T) {
	t.Setenv(addrEnv, "")
	pending := evalIn(droverv1.EvalStatus_EVAL_STATUS_PENDING, nil)
	partial := evalIn(droverv1.EvalStatus_EVAL_STATUS_COMPLETE, func(ev *droverv1.Evaluation) {
		ev.PlacementFailures = []*droverv1.PlacementFailure{webPlacementFailure()}
		ev.QueuedAllocations = map[string]int32{"web": 2, "db": 0}
		ev.BlockedEval = blockedID
	})
	alloc := func(desired droverv1.AllocDesiredStatus, group, eval string) *droverv1.Allocation {
		return &droverv1.Allocation{Id: uuid.NewString(), EvalId: eval, TaskGroup: group, DesiredStatus: desired}
	}
	allocs := []*droverv1.Allocation{
		alloc(droverv1.AllocDesiredStatus_ALLOC_DESIRED_STATUS_RUN, "web", evalID1),
		alloc(droverv1.AllocDesiredStatus_ALLOC_DESIRED_STATUS_RUN, "web", evalID1),
		alloc(droverv1.AllocDesiredStatus_ALLOC_DESIRED_STATUS_RUN, "web", evalID1),
		alloc(droverv1.AllocDesiredStatus_ALLOC_DESIRED_STATUS_STOP, "cache", evalID1), // a group the new version dropped
		alloc(droverv1.AllocDesiredStatus_ALLOC_DESIRED_STATUS_RUN, "db", evalID2),     // placed by an earlier evaluation
	}
	tests := []struct {
		name   string
		cmd    []string
		evals  []*droverv1.Evaluation
		allocs []*droverv1.Allocation
		want   string
	}{
		{
			name:   "run with placement failures",
			cmd:    []string{"job", "run"},
			evals:  []*droverv1.Evaluation{pending, pending, partial},
			allocs: allocs,
			want: `Job "web" registered at version 3
Evaluation ID: ` + evalID1 + `
==> Monitoring evaluation "3f2a1b4c"
==> Evaluation "3f2a1b4c" finished with status "complete" but failed to place all allocations:
    Task Group "web" (failed to place 2 allocations):
      * No nodes are available in datacenter "dc2"
      * Filter "node.class = gpu" excluded 1 node
      * Resources exhausted on 4 nodes
      * Dimension "cpu" exhausted on 1 node
      * Dimension "memory" exhausted on 3 nodes
    Evaluation "9e8d7c6b" waiting for additional capacity to place remainder

    Task Group  Placed  Stopped  Queued
    web         3       0        2
    db          0       0        0
    cache       0       1        0
`,
		},
		{
			name:  "run placing everything",
			cmd:   []string{"job", "run"},
			evals: []*droverv1.Evaluation{evalIn(droverv1.EvalStatus_EVAL_STATUS_COMPLETE, nil)},
			allocs: []*droverv1.Allocation{
				alloc(droverv1.AllocDesiredStatus_ALLOC_DESIRED_STATUS_RUN, "db", evalID1),
			},
			want: `Job "web" registered at version 3
Evaluation ID: ` + evalID1 + `
==> Monitoring evaluation "3f2a1b4c"
==> Evaluation "3f2a1b4c" finished with status "complete"

    Task Group  Placed  Stopped  Queued
    web         0       0        0
    db          1       0        0
`,
		},
		{
			name: "run superseded",
			cmd:  []string{"job", "run"},
			evals: []*droverv1.Evaluation{pending, evalIn(droverv1.EvalStatus_EVAL_STATUS_CANCELED, func(ev *droverv1.Evaluation) {
				ev.StatusDescription = "superseded by a newer evaluation"
			})},
			want: `Job "web" registered at version 3
Evaluation ID: ` + evalID1 + `
==> Monitoring evaluation "3f2a1b4c"
==> Evaluation "3f2a1b4c" finished with status "canceled" (superseded by a newer evaluation)

    Task Group  Placed  Stopped  Queued
    web         0       0        0
    db          0       0        0
`,
		},
		{
			name:  "run -detach",
			cmd:   []string{"job", "run", "-detach"},
			evals: []*droverv1.Evaluation{pending},
			want: `Job "web" registered at version 3
Evaluation ID: ` + evalID1 + `
`,
		},
		{
			name:  "stop",
			cmd:   []string{"job", "stop"},
			evals: []*droverv1.Evaluation{pending, evalIn(droverv1.EvalStatus_EVAL_STATUS_COMPLETE, nil)},
			allocs: []*droverv1.Allocation{
				alloc(droverv1.AllocDesiredStatus_ALLOC_DESIRED_STATUS_STOP, "web", evalID1),
				alloc(droverv1.AllocDesiredStatus_ALLOC_DESIRED_STATUS_STOP, "web", evalID1),
			},
			want: `Job "web" stopped
Evaluation ID: ` + evalID1 + `
==> Monitoring evaluation "3f2a1b4c"
==> Evaluation "3f2a1b4c" finished with status "complete"

    Task Group  Placed  Stopped  Queued
    web         0       2        0
`,
		},
		{
			name:  "stop -detach",
			cmd:   []string{"job", "stop", "-detach"},
			evals: []*droverv1.Evaluation{pending},
			want:  "Job \"web\" stopped\nEvaluation ID: " + evalID1 + "\n",
		},
	}
	jobFile := writeJobFile(t, twoGroupJob)
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			fake := &fakeScheduling{evals: tt.evals, allocs: tt.allocs}
			addr := startScheduling(t, fake)
			arg := jobFile
			if tt.cmd[1] == "stop" {
				arg = "web"
			}
			stdout, stderr, err := run(t, append(withAddr(addr, tt.cmd), arg)...)
			if err != nil {
				t.Fatalf("error %v; stderr:\n%s", err, stderr)
			}
			if stdout != tt.want {
				t.Errorf("stdout:\n%s\nwant:\n%s", stdout, tt.want)
			}
			if stderr != "" {
				t.Errorf("stderr: %q", stderr)
			}
			reads, _, _ := fake.requests()
			detach := strings.Contains(strings.Join(tt.cmd, " "), "-detach")
			if detach && len(reads) != 0 {
				t.Errorf("-detach read the evaluation %d times", len(reads))
			}
			// Every read after the first blocks on the index the previous
			// one returned.
			for i, r := range reads {
				if r.GetEvalId() != evalID1 || r.GetQuery().GetMinIndex() != uint64(i) || (i > 0 && r.GetQuery().GetMaxWait().AsDuration() <= 0) {
					t.Errorf("read %d: %v, want eval %s with min_index %d and a max_wait", i, r, evalID1, i)
				}
			}
		})
	}
}

func TestJobWritesSendRequestIDs(t *testing.T) {
	t.Setenv(addrEnv, "")
	fake := &fakeScheduling{evals: []*droverv1.Evaluation{evalIn(droverv1.EvalStatus_EVAL_STATUS_PENDING, nil)}}
	addr := startScheduling(t, fake)
	jobFile := writeJobFile(t, twoGroupJob)
	for _, args := range [][]string{
		append(withAddr(addr, []string{"job", "run", "-detach"}), jobFile),
		append(withAddr(addr, []string{"job", "run", "-detach", "-request-id", "retry-1"}), jobFile),
		append(withAddr(addr, []string{"job", "stop", "-detach"}), "web"),
		append(withAddr(addr, []string{"job", "stop", "-detach", "-request-id", "retry-2"}), "web"),
	} {
		if _, stderr, err := run(t, args...); err != nil {
			t.Fatalf("%v: error %v; stderr:\n%s", args, err, stderr)
		}
	}
	_, register, stop := fake.requests()
	if len(register) != 2 || len(stop) != 2 {
		t.Fatalf("%d registrations and %d stops, want 2 of each", len(register), len(stop))
	}
	if _, err := uuid.Parse(register[0].GetRequestId()); err != nil {
		t.Errorf("default request id %q is not a UUID", register[0].GetRequestId())
	}
	if _, err := uuid.Parse(stop[0].GetRequestId()); err != nil {
		t.Errorf("default request id %q is not a UUID", stop[0].GetRequestId())
	}
	if register[1].GetRequestId() != "retry-1" || stop[1].GetRequestId() != "retry-2" {
		t.Errorf("request ids %q and %q, want retry-1 and retry-2", register[1].GetRequestId(), stop[1].GetRequestId())
	}
	want := &droverv1.Job{Id: "web", Datacenters: []string{"dc1", "dc2"}, TaskGroups: []*droverv1.TaskGroup{
		{Name: "web", Count: 5, Resources: &droverv1.Resources{CpuMhz: 500, MemoryMb: 256}, MaxClientDisconnect: durationpb.New(5 * time.Minute)},
		{Name: "db", Count: 1, Resources: &droverv1.Resources{CpuMhz: 1000, MemoryMb: 1024}},
	}}
	if !proto.Equal(register[0].GetJob(), want) {
		t.Errorf("registered %v, want %v", register[0].GetJob(), want)
	}
	if stop[0].GetJobId() != "web" {
		t.Errorf("stopped %q, want web", stop[0].GetJobId())
	}
}

func TestJobRunEndsFollowing(t *testing.T) {
	t.Setenv(addrEnv, "")
	jobFile := writeJobFile(t, twoGroupJob)
	const registered = "Job \"web\" registered at version 3\nEvaluation ID: " + evalID1 + "\n==> Monitoring evaluation \"3f2a1b4c\"\n"
	const carriesOn = "The evaluation carries on: `drover eval status 3f2a1b4c` shows how it ends.\n"

	t.Run("-timeout", func(t *testing.T) {
		fake := &fakeScheduling{evals: []*droverv1.Evaluation{evalIn(droverv1.EvalStatus_EVAL_STATUS_PENDING, nil)}, hang: true, blocked: make(chan struct{})}
		addr := startScheduling(t, fake)
		stdout, stderr, err := run(t, "job", "run", "-address", addr, "-timeout", "300ms", jobFile)
		if err == nil || !Reported(err) {
			t.Fatalf("error %v, want a reported one", err)
		}
		if stdout != registered {
			t.Errorf("stdout:\n%s\nwant:\n%s", stdout, registered)
		}
		want := "Error following evaluation " + evalID1 + ": still pending after -timeout 300ms\n" + carriesOn
		if stderr != want {
			t.Errorf("stderr:\n%q\nwant:\n%q", stderr, want)
		}
	})

	t.Run("Ctrl-C", func(t *testing.T) {
		fake := &fakeScheduling{evals: []*droverv1.Evaluation{evalIn(droverv1.EvalStatus_EVAL_STATUS_PENDING, nil)}, hang: true, blocked: make(chan struct{})}
		addr := startScheduling(t, fake)
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		// The follow is diverting SIGINT from the moment it reads the
		// evaluation, so the signal reaches it rather than ending the test.
		go func() {
			select {
			case <-fake.blocked:
				_ = syscall.Kill(syscall.Getpid(), syscall.SIGINT)
			case <-ctx.Done():
			}
		}()
		var stdout, stderr bytes.Buffer
		err := Run(ctx, Root(&stdout, &stderr), []string{"job", "run", "-address", addr, jobFile})
		if err == nil || !Reported(err) {
			t.Fatalf("error %v, want a reported one", err)
		}
		if stdout.String() != registered {
			t.Errorf("stdout:\n%s\nwant:\n%s", stdout.String(), registered)
		}
		want := "Error following evaluation " + evalID1 + ": interrupt signal received\n" + carriesOn
		if stderr.String() != want {
			t.Errorf("stderr:\n%q\nwant:\n%q", stderr.String(), want)
		}
	})

	t.Run("failed evaluation", func(t *testing.T) {
		fake := &fakeScheduling{evals: []*droverv1.Evaluation{evalIn(droverv1.EvalStatus_EVAL_STATUS_FAILED, func(ev *droverv1.Evaluation) {
			ev.StatusDescription = "delivery limit reached"
		})}}
		addr := startScheduling(t, fake)
		stdout, stderr, err := run(t, withAddr(addr, []string{"job", "run"}, jobFile)...)
		if err == nil || !Reported(err) {
			t.Fatalf("error %v, want a reported one", err)
		}
		if !strings.HasPrefix(stdout, registered+`==> Evaluation "3f2a1b4c" finished with status "failed" (delivery limit reached)`) {
			t.Errorf("stdout:\n%s", stdout)
		}
		want := `Error scheduling job "web": evaluation ` + evalID1 + " failed: delivery limit reached\n"
		if stderr != want {
			t.Errorf("stderr:\n%q\nwant:\n%q", stderr, want)
		}
	})
}

func TestJobUsageErrors(t *testing.T) {
	t.Setenv(addrEnv, "")
	fake := &fakeScheduling{evals: []*droverv1.Evaluation{evalIn(droverv1.EvalStatus_EVAL_STATUS_PENDING, nil)}}
	addr := startScheduling(t, fake)
	typo := writeJobFile(t, `{"id": "web", "task_groups": [{"name": "web", "cout": 3}]}`)
	tests := []struct {
		name    string
		args    []string
		wantErr string
	}{
		{"run without a file", []string{"job", "run"}, "give exactly one job file, or - to read it from stdin"},
		{"run with two files", []string{"job", "run", "a.json", "b.json"}, "give exactly one job file"},
		{"run with a typo", []string{"job", "run", typo}, `job file ` + typo + `: task_groups[0].cout: unknown field (did you mean "count"?)`},
		{"run with a bad duration", []string{"job", "run", writeJobFile(t, `{"id": "web", "task_groups": [{"name": "web", "max_client_disconnect": "5 minutes"}]}`)},
			`task_groups[0].max_client_disconnect: invalid duration "5 minutes"`},
		{"stop without an id", []string{"job", "stop"}, "give exactly one job id"},
		{"status with two ids", []string{"job", "status", "a", "b"}, "give at most one job id, not 2"},
		{"eval status without an id", []string{"eval", "status"}, "give exactly one evaluation id"},
		{"eval list with an argument", []string{"eval", "list", "web"}, "unexpected arguments: web"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			args := append([]string{tt.args[0], tt.args[1], "-address", addr}, tt.args[2:]...)
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
	if reads, register, stop := fake.requests(); len(reads)+len(register)+len(stop) != 0 {
		t.Errorf("the server was called: %d reads, %d registrations, %d stops", len(reads), len(register), len(stop))
	}
}
