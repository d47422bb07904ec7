package loadgen

import (
	"context"
	"errors"
	"fmt"

	"google.golang.org/grpc"

	droverv1 "github.com/droverhq/drover/proto/drover/v1"
	"github.com/droverhq/drover/rpc"
)

// listPageSize is the page size of the driver's list calls (the servers'
// maximum), so that reading 100,000 allocations takes ten calls.
const listPageSize = 10000

// clusterClient reads the cluster's state: writes and consistent reads go
// through the first server, applied indexes are asked of every one.
type clusterClient struct {
	addrs []string
	conns []*grpc.ClientConn
}

// dialCluster connects to every server.
func dialCluster(addrs []string, opts []grpc.DialOption) (*clusterClient, error) {
	c := &clusterClient{addrs: addrs}
	// opts come last: they win, e.g. TLS credentials over plaintext.
	opts = append(rpc.ClientDialOptions(nil), opts...)
	for _, a := range addrs {
		conn, err := grpc.NewClient(a, opts...)
		if err != nil {
			_ = c.close()
			return nil, fmt.Errorf("loadgen: dial %s: %w", a, err)
		}
		c.conns = append(c.conns, conn)
	}
	return c, nil
}

func (c *clusterClient) close() error {
	var errs []error
	for _, conn := range c.conns {
		errs = append(errs, conn.Close())
	}
	return errors.Join(errs...)
}

func (c *clusterClient) jobs() droverv1.JobServiceClient {
	return droverv1.NewJobServiceClient(c.conns[0])
}

// appliedIndexes returns each server's last applied raft index.
func (c *clusterClient) appliedIndexes(ctx context.Context) ([]uint64, error) {
	out := make([]uint64, len(c.conns))
	for i, conn := range c.conns {
		resp, err := droverv1.NewOperatorServiceClient(conn).StateDigest(ctx, &droverv1.StateDigestRequest{})
		if err != nil {
			return nil, fmt.Errorf("loadgen: applied index of %s: %w", c.addrs[i], err)
		}
		out[i] = resp.GetIndex()
	}
	return out, nil
}

// maxIndex returns the highest applied index of the cluster: every write
// acknowledged so far is at or below it.
func (c *clusterClient) maxIndex(ctx context.Context) (uint64, error) {
	idx, err := c.appliedIndexes(ctx)
	if err != nil {
		return 0, err
	}
	return maxOf(idx), nil
}

func maxOf(xs []uint64) uint64 {
	var m uint64
	for _, x := range xs {
		m = max(m, x)
	}
	return m
}

// listAll reads every page of a list: list returns one page's items and
// the token of the next page ("" after the last).
func listAll[T any](ctx context.Context, what string, list func(ctx context.Context, page *droverv1.PageOptions) ([]T, string, error)) ([]T, error) {
	var out []T
	page := &droverv1.PageOptions{PageSize: listPageSize}
	for {
		items, next, err := list(ctx, page)
		if err != nil {
			return nil, fmt.Errorf("loadgen: %s: %w", what, err)
		}
		out = append(out, items...)
		if next == "" {
			return out, nil
		}
		page = &droverv1.PageOptions{PageSize: listPageSize, NextToken: next}
	}
}

// jobAllocs lists every allocation of the job.
func (c *clusterClient) jobAllocs(ctx context.Context, jobID string) ([]*droverv1.Allocation, error) {
	return listAll(ctx, "allocations of job "+jobID, func(ctx context.Context, page *droverv1.PageOptions) ([]*droverv1.Allocation, string, error) {
		resp, err := c.jobs().Allocations(ctx, &droverv1.ListJobAllocationsRequest{JobId: jobID, Page: page})
		return resp.GetAllocations(), resp.GetNextToken(), err
	})
}

// jobEvals lists every evaluation of the job.
func (c *clusterClient) jobEvals(ctx context.Context, jobID string) ([]*droverv1.Evaluation, error) {
	return listAll(ctx, "evaluations of job "+jobID, func(ctx context.Context, page *droverv1.PageOptions) ([]*droverv1.Evaluation, string, error) {
		resp, err := c.jobs().Evaluations(ctx, &droverv1.ListJobEvaluationsRequest{JobId: jobID, Page: page})
		return resp.GetEvaluations(), resp.GetNextToken(), err
	})
}

// nodeCounts counts the cluster's nodes by status.
func (c *clusterClient) nodeCounts(ctx context.Context) (map[string]int, error) {
	client := droverv1.NewNodeServiceClient(c.conns[0])
	nodes, err := listAll(ctx, "list nodes", func(ctx context.Context, page *droverv1.PageOptions) ([]*droverv1.Node, string, error) {
		resp, err := client.List(ctx, &droverv1.ListNodesRequest{Page: page})
		return resp.GetNodes(), resp.GetNextToken(), err
	})
	counts := make(map[string]int)
	for _, n := range nodes {
		counts[n.GetStatus().String()]++
	}
	return counts, err
}

// allocCounts counts the cluster's allocations by client status.
func (c *clusterClient) allocCounts(ctx context.Context) (map[string]int, error) {
	client := droverv1.NewAllocServiceClient(c.conns[0])
	allocs, err := listAll(ctx, "list allocations", func(ctx context.Context, page *droverv1.PageOptions) ([]*droverv1.Allocation, string, error) {
		resp, err := client.List(ctx, &droverv1.ListAllocationsRequest{Page: page})
		return resp.GetAllocations(), resp.GetNextToken(), err
	})
	counts := make(map[string]int)
	for _, a := range allocs {
		counts[a.GetClientStatus().String()]++
	}
	return counts, err
}
