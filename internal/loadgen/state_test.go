package loadgen

import (
	"context"
	"net"
	"strings"
	"testing"

	"google.golang.org/grpc"

	droverv1 "github.com/droverhq/drover/proto/drover/v1"
)

// bigAllocs is a JobService whose every allocation list is one page larger
// than gRPC's default 4 MiB receive limit, as a page of a big job's
// allocations can be.
type bigAllocs struct {
	droverv1.UnimplementedJobServiceServer
}

func (bigAllocs) Allocations(context.Context, *droverv1.ListJobAllocationsRequest) (*droverv1.ListJobAllocationsResponse, error) {
	desc := strings.Repeat("x", 1<<20)
	resp := &droverv1.ListJobAllocationsResponse{}
	for range 6 {
		resp.Allocations = append(resp.Allocations, &droverv1.Allocation{Id: "a", ClientDescription: desc})
	}
	return resp, nil
}

// TestClusterClientReceivesLargeAnswers checks that the driver's
// connections take the servers' largest answers (rpc.ClientDialOptions),
// not only gRPC's default 4 MiB.
func TestClusterClientReceivesLargeAnswers(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := grpc.NewServer()
	droverv1.RegisterJobServiceServer(srv, bigAllocs{})
	served := make(chan struct{})
	go func() {
		defer close(served)
		_ = srv.Serve(l)
	}()
	t.Cleanup(func() {
		srv.Stop()
		<-served
	})

	cl, err := dialCluster([]string{l.Addr().String()}, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer cl.close()
	allocs, err := cl.jobAllocs(t.Context(), "big")
	if err != nil {
		t.Fatal(err)
	}
	if len(allocs) != 6 {
		t.Errorf("got %d allocations, want 6", len(allocs))
	}
}
