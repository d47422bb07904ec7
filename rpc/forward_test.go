package rpc

import (
	"errors"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/durationpb"

	droverv1 "github.com/droverhq/drover/proto/drover/v1"
)

func TestRoute(t *testing.T) {
	second := int64(time.Second)
	cases := []struct {
		name        string
		method      string
		req         any
		lastContact time.Duration
		leader      bool
		confirm     bool
		nowStale    bool // allow_stale after routing
	}{
		{"a write goes to the leader, no read confirmation", droverv1.JobService_Register_FullMethodName,
			&droverv1.RegisterJobRequest{}, 0, true, false, false},
		{"a leader-only operator read is not a state read", droverv1.OperatorService_ServerMembers_FullMethodName,
			&droverv1.ServerMembersRequest{}, 0, true, false, false},
		{"a read without query options is consistent", droverv1.NodeService_List_FullMethodName,
			&droverv1.ListNodesRequest{}, 0, true, true, false},
		{"a consistent read", droverv1.JobService_Get_FullMethodName,
			&droverv1.GetJobRequest{Query: &droverv1.QueryOptions{}}, 0, true, true, false},
		{"a stale read is answered here", droverv1.JobService_Get_FullMethodName,
			&droverv1.GetJobRequest{Query: &droverv1.QueryOptions{AllowStale: true}}, time.Hour, false, false, true},
		{"within max_stale", droverv1.JobService_Get_FullMethodName,
			&droverv1.GetJobRequest{Query: &droverv1.QueryOptions{AllowStale: true, MaxStale: durationpb.New(time.Duration(second))}}, 500 * time.Millisecond, false, false, true},
		{"beyond max_stale it becomes consistent", droverv1.JobService_Get_FullMethodName,
			&droverv1.GetJobRequest{Query: &droverv1.QueryOptions{AllowStale: true, MaxStale: durationpb.New(time.Duration(second))}}, 2 * time.Second, true, true, false},
		{"never in touch with a leader", droverv1.NodeService_Get_FullMethodName,
			&droverv1.GetNodeRequest{Query: &droverv1.QueryOptions{AllowStale: true, MaxStale: durationpb.New(time.Duration(second))}}, -1, true, true, false},
		{"never in touch, any staleness accepted", droverv1.NodeService_Get_FullMethodName,
			&droverv1.GetNodeRequest{Query: &droverv1.QueryOptions{AllowStale: true}}, -1, false, false, true},
		{"agents' long poll is answered here", droverv1.NodeService_GetAllocs_FullMethodName,
			&droverv1.GetAllocsRequest{}, -1, false, false, false},
		{"the state digest is answered here", droverv1.OperatorService_StateDigest_FullMethodName,
			&droverv1.StateDigestRequest{}, -1, false, false, false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			f := &forwarder{lastContact: func() time.Duration { return tc.lastContact }}
			leader, confirm := f.route(tc.method, tc.req)
			if leader != tc.leader || confirm != tc.confirm {
				t.Fatalf("route = leader %v confirm %v, want %v %v", leader, confirm, tc.leader, tc.confirm)
			}
			if q, ok := tc.req.(queryRequest); ok && q.GetQuery().GetAllowStale() != tc.nowStale {
				t.Fatalf("allow_stale %v after routing, want %v", q.GetQuery().GetAllowStale(), tc.nowStale)
			}
		})
	}
}

func TestNotBehind(t *testing.T) {
	cases := []struct {
		applied, minIndex uint64
		ok                bool
	}{
		{10, 0, true}, {10, 10, true}, {10, 9, true}, {10, 11, false},
	}
	for _, tc := range cases {
		if err := notBehind(tc.applied, tc.minIndex); (err == nil) != tc.ok {
			t.Errorf("notBehind(%d, %d) = %v, want ok %v", tc.applied, tc.minIndex, err, tc.ok)
		}
	}
}

// infoCluster is a Cluster that only describes this server.
type infoCluster struct {
	Cluster
	info *droverv1.ServerInfoResponse
}

func (c infoCluster) Info() *droverv1.ServerInfoResponse { return c.info }

func TestRefuseWhileFull(t *testing.T) {
	full := &droverv1.ServerInfoResponse{Server: &droverv1.ServerMember{Id: "s2"}, StorageError: "data dir /d is full: 0 B free"}
	cases := []struct {
		name    string
		info    *droverv1.ServerInfoResponse
		confirm bool
		refused bool
	}{
		{"a write on a full server is refused", full, false, true},
		{"a read on a full server is held as usual", full, true, false},
		{"a write on a server with space is held as usual", &droverv1.ServerInfoResponse{Server: full.GetServer()}, false, false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			f := &forwarder{cluster: infoCluster{info: tc.info}}
			err := f.refuseWhileFull(tc.confirm, errors.New("leader s1: leadership lost"))
			if !tc.refused {
				if err != nil {
					t.Fatalf("refused: %v", err)
				}
				return
			}
			if status.Code(err) != codes.Unavailable || !strings.Contains(err.Error(), "server s2 did not store the write: data dir /d is full") ||
				!strings.Contains(err.Error(), "leadership lost") {
				t.Fatalf("got %v, want UNAVAILABLE naming the full data dir and the last attempt", err)
			}
			if _, ok := RetryHint(err); !ok {
				t.Errorf("no retry hint in %v", err)
			}
		})
	}
}
