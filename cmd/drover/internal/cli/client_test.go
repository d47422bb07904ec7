package cli

import (
	"bytes"
	"context"
	"errors"
	"flag"
	"net"
	"strings"
	"sync"
	"testing"
	"time"

	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/durationpb"

	droverv1 "github.com/droverhq/drover/proto/drover/v1"
	"github.com/droverhq/drover/rpc"
)

// The fake's canned answers.
var (
	fakePeers = &droverv1.RaftListPeersResponse{
		Index: 7,
		Peers: []*droverv1.RaftPeer{
			{Id: "s1", Address: "10.0.0.1:4651", RpcAddr: "10.0.0.1:4650", Voter: true, Leader: true, LastIndex: 120},
			{Id: "s2", Address: "10.0.0.2:4651", RpcAddr: "10.0.0.2:4650", Voter: true, LastIndex: 118},
			{Id: "s3-staging", Address: "10.0.0.3:4651", RpcAddr: "10.0.0.3:4650"},
		},
	}
	fakeMembers = &droverv1.ServerMembersResponse{
		ClusterId:        "0b6f9a52-3c1e-4d7a-9f0e-5a2b8c4d6e10",
		LeaderId:         "s1",
		Healthy:          true,
		FailureTolerance: 1,
		Servers: []*droverv1.ServerHealth{
			{Id: "s1", RpcAddr: "10.0.0.1:4650", RaftAddr: "10.0.0.1:4651", Version: "0.1.0", RaftState: droverv1.RaftState_RAFT_STATE_LEADER, Voter: true, Leader: true, Healthy: true, LastIndex: 120, LastTerm: 2},
			{Id: "s2", RpcAddr: "10.0.0.2:4650", RaftAddr: "10.0.0.2:4651", Version: "0.1.0", RaftState: droverv1.RaftState_RAFT_STATE_FOLLOWER, Voter: true, Healthy: true, LastIndex: 120, LastTerm: 2},
			{Id: "s3", RpcAddr: "10.0.0.3:4650", RaftAddr: "10.0.0.3:4651", Voter: true, Error: "not answering"},
		},
	}
)

// fakeOperator is an OperatorService that answers with the canned
// responses above and records what it was asked.
type fakeOperator struct {
	droverv1.UnimplementedOperatorServiceServer

	err     error                           // when set, every method fails with it
	block   bool                            // when set, every method waits for the caller to give up
	members *droverv1.ServerMembersResponse // ServerMembers' answer instead of fakeMembers

	mu   sync.Mutex
	reqs []proto.Message
}

func (f *fakeOperator) record(ctx context.Context, req proto.Message) error {
	f.mu.Lock()
	f.reqs = append(f.reqs, req)
	f.mu.Unlock()
	if f.block {
		<-ctx.Done()
		return status.FromContextError(ctx.Err()).Err()
	}
	return f.err
}

func (f *fakeOperator) requests() []proto.Message {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]proto.Message(nil), f.reqs...)
}

func (f *fakeOperator) RaftListPeers(ctx context.Context, req *droverv1.RaftListPeersRequest) (*droverv1.RaftListPeersResponse, error) {
	if err := f.record(ctx, req); err != nil {
		return nil, err
	}
	return fakePeers, nil
}

func (f *fakeOperator) RaftRemovePeer(ctx context.Context, req *droverv1.RaftRemovePeerRequest) (*droverv1.RaftRemovePeerResponse, error) {
	if err := f.record(ctx, req); err != nil {
		return nil, err
	}
	id := req.GetId()
	if id == "" {
		id = "s3" // by address: 10.0.0.3:4651
	}
	return &droverv1.RaftRemovePeerResponse{Index: 130, Id: id}, nil
}

func (f *fakeOperator) RaftTransferLeadership(ctx context.Context, req *droverv1.RaftTransferLeadershipRequest) (*droverv1.RaftTransferLeadershipResponse, error) {
	if err := f.record(ctx, req); err != nil {
		return nil, err
	}
	leader := req.GetId()
	if leader == "" {
		leader = "s2"
	}
	return &droverv1.RaftTransferLeadershipResponse{LeaderId: leader}, nil
}

func (f *fakeOperator) ServerMembers(ctx context.Context, req *droverv1.ServerMembersRequest) (*droverv1.ServerMembersResponse, error) {
	if err := f.record(ctx, req); err != nil {
		return nil, err
	}
	if f.members != nil {
		return f.members, nil
	}
	return fakeMembers, nil
}

// startFake serves f on a loopback port until the test ends and returns
// the address.
func startFake(t *testing.T, f *fakeOperator) string {
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

// deadAddr returns a loopback address nothing listens on.
func deadAddr(t *testing.T) string {
	t.Helper()
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := lis.Addr().String()
	if err := lis.Close(); err != nil {
		t.Fatal(err)
	}
	return addr
}

// run runs the drover command line with args, bounded in time.
func run(t *testing.T, args ...string) (stdout, stderr string, err error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	var out, errOut bytes.Buffer
	err = Run(ctx, Root(&out, &errOut), args)
	return out.String(), errOut.String(), err
}

// withAddr puts -address addr and a short -timeout after the command words.
func withAddr(addr string, cmd []string, flags ...string) []string {
	args := append([]string(nil), cmd...)
	args = append(args, "-address", addr, "-timeout", "5s")
	return append(args, flags...)
}

var (
	listPeers          = []string{"operator", "raft", "list-peers"}
	removePeer         = []string{"operator", "raft", "remove-peer"}
	transferLeadership = []string{"operator", "raft", "transfer-leadership"}
	serverMembers      = []string{"server", "members"}
)

func TestCommandOutput(t *testing.T) {
	t.Setenv(addrEnv, "")
	tests := []struct {
		name    string
		cmd     []string
		flags   []string
		want    string
		wantReq proto.Message
	}{
		{
			name: "list-peers",
			cmd:  listPeers,
			want: "" +
				"Node        Address        RPC Address    State     Voter  Last Index\n" +
				"s1          10.0.0.1:4651  10.0.0.1:4650  leader    true   120\n" +
				"s2          10.0.0.2:4651  10.0.0.2:4650  follower  true   118\n" +
				"s3-staging  10.0.0.3:4651  10.0.0.3:4650  follower  false  0\n",
			wantReq: &droverv1.RaftListPeersRequest{},
		},
		{
			name:  "list-peers -json",
			cmd:   listPeers,
			flags: []string{"-json"},
			want: `{
  "peers": [
    {
      "id": "s1",
      "address": "10.0.0.1:4651",
      "rpc_addr": "10.0.0.1:4650",
      "voter": true,
      "leader": true,
      "last_index": "120"
    },
    {
      "id": "s2",
      "address": "10.0.0.2:4651",
      "rpc_addr": "10.0.0.2:4650",
      "voter": true,
      "leader": false,
      "last_index": "118"
    },
    {
      "id": "s3-staging",
      "address": "10.0.0.3:4651",
      "rpc_addr": "10.0.0.3:4650",
      "voter": false,
      "leader": false,
      "last_index": "0"
    }
  ],
  "index": "7"
}
`,
			wantReq: &droverv1.RaftListPeersRequest{},
		},
		{
			name:    "remove-peer -id",
			cmd:     removePeer,
			flags:   []string{"-id", "s3"},
			want:    "Removed peer with id s3\n",
			wantReq: &droverv1.RaftRemovePeerRequest{Id: "s3"},
		},
		{
			name:    "remove-peer -peer-address",
			cmd:     removePeer,
			flags:   []string{"-peer-address", "10.0.0.3:4651"},
			want:    "Removed peer with id s3\n",
			wantReq: &droverv1.RaftRemovePeerRequest{Address: "10.0.0.3:4651"},
		},
		{
			name:  "remove-peer -json",
			cmd:   removePeer,
			flags: []string{"-id", "s3", "-json"},
			want: `{
  "index": "130",
  "id": "s3"
}
`,
			wantReq: &droverv1.RaftRemovePeerRequest{Id: "s3"},
		},
		{
			name:    "transfer-leadership",
			cmd:     transferLeadership,
			want:    "Transferred leadership to s2\n",
			wantReq: &droverv1.RaftTransferLeadershipRequest{},
		},
		{
			name:    "transfer-leadership -id",
			cmd:     transferLeadership,
			flags:   []string{"-id", "s3"},
			want:    "Transferred leadership to s3\n",
			wantReq: &droverv1.RaftTransferLeadershipRequest{Id: "s3"},
		},
		{
			name: "server members",
			cmd:  serverMembers,
			want: "" +
				"ID  RPC Address    Raft Address   Version  Raft State  Voter  Leader  Healthy  Last Index\n" +
				"s1  10.0.0.1:4650  10.0.0.1:4651  0.1.0    leader      true   true    true     120\n" +
				"s2  10.0.0.2:4650  10.0.0.2:4651  0.1.0    follower    true   false   true     120\n" +
				"s3  10.0.0.3:4650  10.0.0.3:4651  -        unknown     true   false   false    0\n" +
				"\n" +
				"Cluster ID: 0b6f9a52-3c1e-4d7a-9f0e-5a2b8c4d6e10\n" +
				"Cluster healthy: true, failure tolerance: 1\n",
			wantReq: &droverv1.ServerMembersRequest{},
		},
		{
			name:  "server members -json",
			cmd:   serverMembers,
			flags: []string{"-json"},
			want: `{
  "servers": [
    {
      "id": "s1",
      "rpc_addr": "10.0.0.1:4650",
      "raft_addr": "10.0.0.1:4651",
      "version": "0.1.0",
      "raft_state": "RAFT_STATE_LEADER",
      "voter": true,
      "leader": true,
      "healthy": true,
      "stable_since": "0",
      "last_index": "120",
      "last_term": "2",
      "error": "",
      "last_contact": null
    },
    {
      "id": "s2",
      "rpc_addr": "10.0.0.2:4650",
      "raft_addr": "10.0.0.2:4651",
      "version": "0.1.0",
      "raft_state": "RAFT_STATE_FOLLOWER",
      "voter": true,
      "leader": false,
      "healthy": true,
      "stable_since": "0",
      "last_index": "120",
      "last_term": "2",
      "error": "",
      "last_contact": null
    },
    {
      "id": "s3",
      "rpc_addr": "10.0.0.3:4650",
      "raft_addr": "10.0.0.3:4651",
      "version": "",
      "raft_state": "RAFT_STATE_UNSPECIFIED",
      "voter": true,
      "leader": false,
      "healthy": false,
      "stable_since": "0",
      "last_index": "0",
      "last_term": "0",
      "error": "not answering",
      "last_contact": null
    }
  ],
  "leader_id": "s1",
  "healthy": true,
  "failure_tolerance": 1,
  "cluster_id": "0b6f9a52-3c1e-4d7a-9f0e-5a2b8c4d6e10"
}
`,
			wantReq: &droverv1.ServerMembersRequest{},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			fake := &fakeOperator{}
			addr := startFake(t, fake)
			stdout, stderr, err := run(t, withAddr(addr, tt.cmd, tt.flags...)...)
			if err != nil {
				t.Fatalf("error %v; stderr:\n%s", err, stderr)
			}
			if stdout != tt.want {
				t.Errorf("stdout:\n%s\nwant:\n%s", stdout, tt.want)
			}
			if stderr != "" {
				t.Errorf("stderr: %q", stderr)
			}
			reqs := fake.requests()
			if len(reqs) != 1 || !proto.Equal(reqs[0], tt.wantReq) {
				t.Errorf("server got %v, want [%v]", reqs, tt.wantReq)
			}
		})
	}
}

func TestUsageErrors(t *testing.T) {
	t.Setenv(addrEnv, "")
	tests := []struct {
		name    string
		args    []string
		wantErr string // substring of the returned error; "" for flag.ErrHelp
		stderr  string // substring of stderr
	}{
		{"remove-peer with neither flag", removePeer, "exactly one of -id and -peer-address", "USAGE"},
		{"remove-peer with both flags", append(removePeer[:3:3], "-id", "s3", "-peer-address", "10.0.0.3:4651"), "exactly one of -id and -peer-address", "USAGE"},
		{"unexpected argument", append(listPeers[:3:3], "s1"), "unexpected arguments: s1", ""},
		{"unknown flag", append(serverMembers[:2:2], "-bogus"), `unknown flag -bogus for "drover server members"`, ""},
		{"bad timeout", append(transferLeadership[:3:3], "-timeout", "soon"), "invalid value", ""},
		{"operator alone", []string{"operator"}, "", "drover operator <subcommand>"},
		{"unknown raft subcommand", []string{"operator", "raft", "list-servers"}, `unknown command "list-servers" for "drover operator raft"; did you mean "list-peers"?`, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			fake := &fakeOperator{}
			addr := startFake(t, fake)
			args := append(tt.args, "-address", addr)
			if tt.wantErr == "" {
				args = tt.args // group commands take no flags but -h
			}
			stdout, stderr, err := run(t, args...)
			switch {
			case err == nil:
				t.Fatal("no error")
			case tt.wantErr == "" && !errors.Is(err, flag.ErrHelp):
				t.Errorf("error %v, want flag.ErrHelp", err)
			case !strings.Contains(err.Error(), tt.wantErr):
				t.Errorf("error %q, want it to mention %q", err, tt.wantErr)
			}
			if Reported(err) {
				t.Errorf("usage error %v counted as reported; main should print it", err)
			}
			if !strings.Contains(stderr, tt.stderr) {
				t.Errorf("stderr does not mention %q:\n%s", tt.stderr, stderr)
			}
			if stdout != "" {
				t.Errorf("stdout: %q", stdout)
			}
			if reqs := fake.requests(); len(reqs) != 0 {
				t.Errorf("server was called: %v", reqs)
			}
		})
	}
}

func TestServerAddressFromEnvironment(t *testing.T) {
	t.Run("DROVER_ADDR", func(t *testing.T) {
		fake := &fakeOperator{}
		t.Setenv(addrEnv, startFake(t, fake))
		stdout, stderr, err := run(t, "operator", "raft", "transfer-leadership", "-timeout", "5s")
		if err != nil {
			t.Fatalf("error %v; stderr:\n%s", err, stderr)
		}
		if stdout != "Transferred leadership to s2\n" || len(fake.requests()) != 1 {
			t.Errorf("stdout %q, %d calls", stdout, len(fake.requests()))
		}
	})
	t.Run("-address wins over DROVER_ADDR", func(t *testing.T) {
		fake := &fakeOperator{}
		addr := startFake(t, fake)
		t.Setenv(addrEnv, deadAddr(t))
		stdout, stderr, err := run(t, withAddr(addr, serverMembers)...)
		if err != nil {
			t.Fatalf("error %v; stderr:\n%s", err, stderr)
		}
		if !strings.HasSuffix(stdout, "Cluster healthy: true, failure tolerance: 1\n") || len(fake.requests()) != 1 {
			t.Errorf("stdout %q, %d calls", stdout, len(fake.requests()))
		}
	})
	t.Run("default", func(t *testing.T) {
		t.Setenv(addrEnv, "")
		if got := (&clientOptions{}).serverAddr(); got != "127.0.0.1:4650" {
			t.Errorf("address %q with neither -address nor DROVER_ADDR", got)
		}
		t.Setenv(addrEnv, " 10.1.2.3:4650 ")
		if got := (&clientOptions{}).serverAddr(); got != "10.1.2.3:4650" {
			t.Errorf("address %q from DROVER_ADDR", got)
		}
	})
}

func TestErrorReporting(t *testing.T) {
	dead := deadAddr(t)
	t.Setenv(addrEnv, "")
	retryLater, err := status.New(codes.Unavailable, "no cluster leader").
		WithDetails(&errdetails.RetryInfo{RetryDelay: durationpb.New(time.Second)})
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name       string
		fake       *fakeOperator
		addr       string // instead of the fake's
		args       []string
		wantCode   codes.Code
		wantStderr string // exact, or the start when wantSuffix is set
		wantSuffix string // the end of stderr
	}{
		{
			name:       "not found",
			fake:       &fakeOperator{err: status.Error(codes.NotFound, "no server with id s9")},
			args:       append(removePeer[:3:3], "-id", "s9"),
			wantCode:   codes.NotFound,
			wantStderr: "Error removing raft peer: no server with id s9 (NotFound)\n",
		},
		{
			name:     "unavailable with retry info",
			fake:     &fakeOperator{err: retryLater.Err()},
			args:     listPeers,
			wantCode: codes.Unavailable,
			wantStderr: "Error listing raft peers: no cluster leader (Unavailable)\n" +
				"The server suggests retrying after 1s.\n",
		},
		{
			name:       "failed precondition",
			fake:       &fakeOperator{err: status.Error(codes.FailedPrecondition, "s1 is the leader: transfer leadership first")},
			args:       append(removePeer[:3:3], "-id", "s1"),
			wantCode:   codes.FailedPrecondition,
			wantStderr: "Error removing raft peer: s1 is the leader: transfer leadership first (FailedPrecondition)\n",
		},
		{
			name:     "timeout",
			fake:     &fakeOperator{block: true},
			args:     append(serverMembers[:2:2], "-timeout", "200ms"),
			wantCode: codes.DeadlineExceeded,
			// The message is grpc's, and which one depends on who notices first.
			wantStderr: "Error listing server members: ",
			wantSuffix: " (DeadlineExceeded)\nNo answer within -timeout 200ms.\n",
		},
		{
			name:       "nothing listening",
			addr:       dead,
			args:       transferLeadership,
			wantCode:   codes.Unavailable,
			wantStderr: "Error transferring leadership: ",
			wantSuffix: " (Unavailable)\nNothing is listening at " + dead + ": is the server running, and is -address (or $DROVER_ADDR) right?\n",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			addr := tt.addr
			if tt.fake != nil {
				addr = startFake(t, tt.fake)
			}
			// The case's own -timeout, when it has one, comes last and wins.
			args := append(append([]string(nil), tt.args...), "-address", addr)
			if !strings.Contains(strings.Join(tt.args, " "), "-timeout") {
				args = append(args, "-timeout", "5s")
			}
			stdout, stderr, err := run(t, args...)
			if err == nil {
				t.Fatal("no error")
			}
			if !Reported(err) {
				t.Errorf("error %v not marked as reported", err)
			}
			if got := status.Code(err); got != tt.wantCode {
				t.Errorf("code %s, want %s", got, tt.wantCode)
			}
			if tt.wantSuffix != "" {
				if !strings.HasPrefix(stderr, tt.wantStderr) || !strings.HasSuffix(stderr, tt.wantSuffix) ||
					strings.Count(stderr, "\n") != strings.Count(tt.wantStderr+tt.wantSuffix, "\n") {
					t.Errorf("stderr:\n%q\nwant:\n%q ... %q", stderr, tt.wantStderr, tt.wantSuffix)
				}
			} else if stderr != tt.wantStderr {
				t.Errorf("stderr:\n%q\nwant:\n%q", stderr, tt.wantStderr)
			}
			if stdout != "" {
				t.Errorf("stdout: %q", stdout)
			}
		})
	}
}
