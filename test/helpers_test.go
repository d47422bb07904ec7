package test_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/droverhq/drover/internal/mock"
	droverv1 "github.com/droverhq/drover/proto/drover/v1"
	"github.com/droverhq/drover/test/cluster"
)

// callTimeout bounds one RPC of a test. A server that cannot reach a leader
// must answer Unavailable well within it (its leader hold timeout is 5s).
const callTimeout = 15 * time.Second

// retryPause is the pause before a call that failed is made again:
// backoff, not synchronisation.
const retryPause = 20 * time.Millisecond

// registerNode registers n through conn with a per-call deadline.
func registerNode(ctx context.Context, conn grpc.ClientConnInterface, n *droverv1.Node) (*droverv1.RegisterNodeResponse, error) {
	ctx, cancel := context.WithTimeout(ctx, callTimeout)
	defer cancel()
	return droverv1.NewNodeServiceClient(conn).Register(ctx, &droverv1.RegisterNodeRequest{Node: n.CloneVT()})
}

// registerJob registers j with request id through conn with a per-call
// deadline.
func registerJob(ctx context.Context, conn grpc.ClientConnInterface, j *droverv1.Job, requestID string) (*droverv1.RegisterJobResponse, error) {
	ctx, cancel := context.WithTimeout(ctx, callTimeout)
	defer cancel()
	return droverv1.NewJobServiceClient(conn).Register(ctx, &droverv1.RegisterJobRequest{Job: j.CloneVT(), RequestId: requestID})
}

// retryUnavailable calls f until it succeeds, retrying Unavailable errors
// (an election, a server that is down) until ctx ends. Any other error
// fails the test.
func retryUnavailable(ctx context.Context, t testing.TB, what string, f func(context.Context) error) {
	t.Helper()
	var last error
	for tries := 1; ; tries++ {
		err := f(ctx)
		if err == nil {
			if tries > 1 {
				t.Logf("%s: succeeded after %d tries (last error: %v)", what, tries, last)
			}
			return
		}
		if status.Code(err) != codes.Unavailable {
			t.Fatalf("%s: %v (code %s), want success or Unavailable", what, err, status.Code(err))
		}
		last = err
		select {
		case <-ctx.Done():
			t.Fatalf("%s: no success before the test's deadline; last error: %v", what, last)
		case <-time.After(retryPause):
		}
	}
}

// nodeKnown asks s, from its own state (GetAllocs is answered locally),
// whether it knows node n.
func nodeKnown(ctx context.Context, s *cluster.Server, n *droverv1.Node) (bool, error) {
	ctx, cancel := context.WithTimeout(ctx, callTimeout)
	defer cancel()
	_, err := droverv1.NewNodeServiceClient(s.Conn()).GetAllocs(ctx, &droverv1.GetAllocsRequest{NodeId: n.GetId(), SecretId: n.GetSecretId()})
	switch status.Code(err) {
	case codes.OK:
		return true, nil
	case codes.NotFound:
		return false, nil
	}
	return false, fmt.Errorf("GetAllocs of node %s on %s: %w", n.GetId(), s, err)
}

// requireNodes fails the test unless every server knows every node. It asks
// concurrently, one goroutine per server.
func requireNodes(ctx context.Context, t *testing.T, servers []*cluster.Server, nodes []*droverv1.Node) {
	t.Helper()
	if len(nodes) == 0 {
		t.Fatal("requireNodes: no nodes to look for")
	}
	var (
		mu       sync.Mutex
		problems []string
		wg       sync.WaitGroup
	)
	for _, s := range servers {
		wg.Go(func() {
			missing := 0
			for _, n := range nodes {
				ok, err := nodeKnown(ctx, s, n)
				if err != nil || !ok {
					missing++
					mu.Lock()
					if len(problems) < 20 {
						if err == nil {
							err = errors.New("NotFound")
						}
						problems = append(problems, fmt.Sprintf("%s does not know node %s: %v", s, n.GetId(), err))
					}
					mu.Unlock()
				}
			}
			if missing > 0 {
				mu.Lock()
				problems = append(problems, fmt.Sprintf("%s: %d of %d nodes missing", s, missing, len(nodes)))
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	for _, p := range problems {
		t.Error(p)
	}
	if len(problems) > 0 {
		t.FailNow()
	}
}

// jobKnown asks s, from its own state (a stale read), whether it knows the
// job.
func jobKnown(ctx context.Context, s *cluster.Server, jobID string) (bool, error) {
	ctx, cancel := context.WithTimeout(ctx, callTimeout)
	defer cancel()
	_, err := droverv1.NewJobServiceClient(s.Conn()).Get(ctx, &droverv1.GetJobRequest{JobId: jobID, Query: &droverv1.QueryOptions{AllowStale: true}})
	switch status.Code(err) {
	case codes.OK:
		return true, nil
	case codes.NotFound:
		return false, nil
	}
	return false, fmt.Errorf("Get job %s on %s: %w", jobID, s, err)
}

// registerNodes registers count new nodes through conn, workers at a time,
// and returns them. Every registration must succeed.
func registerNodes(ctx context.Context, t testing.TB, conn grpc.ClientConnInterface, count, workers int) []*droverv1.Node {
	t.Helper()
	nodes := make([]*droverv1.Node, count)
	for i := range nodes {
		nodes[i] = mock.Node()
	}
	errs := make(chan error, workers)
	var wg sync.WaitGroup
	for w := range workers {
		wg.Go(func() {
			for i := w; i < count; i += workers {
				if _, err := registerNode(ctx, conn, nodes[i]); err != nil {
					errs <- fmt.Errorf("register node %d of %d: %w", i, count, err)
					return
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	if t.Failed() {
		t.FailNow()
	}
	return nodes
}

// serverInfo asks s about itself.
func serverInfo(ctx context.Context, s *cluster.Server) (*droverv1.ServerInfoResponse, error) {
	ctx, cancel := context.WithTimeout(ctx, callTimeout)
	defer cancel()
	return droverv1.NewClusterServiceClient(s.Conn()).Info(ctx, &droverv1.ServerInfoRequest{})
}

// poll calls check until it returns true or ctx ends, then fails the test
// with check's last explanation.
func poll(ctx context.Context, t testing.TB, what string, check func() (bool, string)) {
	t.Helper()
	start := time.Now()
	for {
		ok, why := check()
		if ok {
			t.Logf("%s after %s", what, time.Since(start).Round(time.Millisecond))
			return
		}
		select {
		case <-ctx.Done():
			t.Fatalf("not %s after %s: %s", what, time.Since(start).Round(time.Millisecond), why)
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// within returns a context that ends after d or with ctx.
func within(t *testing.T, ctx context.Context, d time.Duration) context.Context {
	ctx, cancel := context.WithTimeout(ctx, d)
	t.Cleanup(cancel)
	return ctx
}

// retryInfo reports whether an error status carries a retry hint.
func retryInfo(err error) bool {
	for _, d := range status.Convert(err).Details() {
		if _, ok := d.(*errdetails.RetryInfo); ok {
			return true
		}
	}
	return false
}
