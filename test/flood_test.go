package test_test

import (
	"bufio"
	"context"
	"fmt"
	"maps"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/connectivity"
	"google.golang.org/grpc/encoding"
	"google.golang.org/grpc/mem"
	"google.golang.org/grpc/status"

	droverv1 "github.com/droverhq/drover/proto/drover/v1"
	"github.com/droverhq/drover/rpc"
	"github.com/droverhq/drover/test/cluster"
)

// flood is an operator flood: many client connections to one server, each
// calling NodeService.List (a consistent read of every node, which a
// follower forwards to the leader) again and again for a fixed window.
type flood struct {
	// conns is how many client connections the flood opens, each its own
	// grpc.ClientConn and so its own TCP connection.
	conns int
	// window is how long new calls are started; calls in flight at its end
	// run to their deadline.
	window time.Duration
	// callTimeout is each call's deadline.
	callTimeout time.Duration
	// pageSize is the page asked for: the whole fleet, so that every call
	// serialises every node.
	pageSize int32
}

// floodResult is what the flood's calls came to.
type floodResult struct {
	answered uint64
	// timedOut counts calls that ended in DeadlineExceeded.
	timedOut uint64
	// refused counts the other failures by code; withRetryInfo those of
	// them that carried a RetryInfo hint.
	refused       map[codes.Code]uint64
	withRetryInfo uint64
	// answerBytes is the size of the answers received.
	answerBytes int64
	// answeredLatency and refusedLatency sample calls' durations.
	answeredLatency, refusedLatency []time.Duration
	// dialed counts the flood's connections, connected those that reached
	// READY before the window, established the TCP connections to the
	// target the kernel listed then, beyond those there were before the
	// flood dialed.
	dialed, connected, established int
	// took is from the start of the window to the end of the last call.
	took time.Duration
}

// refusals is the number of calls refused (any code but OK and
// DeadlineExceeded).
func (r floodResult) refusals() uint64 {
	var n uint64
	for _, v := range r.refused {
		n += v
	}
	return n
}

func (r floodResult) String() string {
	codes := slices.Sorted(maps.Keys(r.refused))
	var refused []string
	for _, c := range codes {
		refused = append(refused, fmt.Sprintf("%s=%d", c, r.refused[c]))
	}
	return fmt.Sprintf("%d connections (%d ready, %d established), %s: answered %d (%.1f MB, p50 %s, p99 %s), refused %d [%s] (%d with RetryInfo, p99 %s), timed out %d",
		r.dialed, r.connected, r.established, r.took.Round(time.Second), r.answered, float64(r.answerBytes)/1e6,
		percentile(r.answeredLatency, 50), percentile(r.answeredLatency, 99),
		r.refusals(), strings.Join(refused, " "), r.withRetryInfo, percentile(r.refusedLatency, 99), r.timedOut)
}

// percentile returns the p-th percentile of d (0 when empty).
func percentile(d []time.Duration, p int) time.Duration {
	if len(d) == 0 {
		return 0
	}
	s := slices.Clone(d)
	slices.Sort(s)
	return s[min(len(s)-1, len(s)*p/100)].Round(time.Millisecond)
}

// run dials the connections to target, waits (bounded) until they are
// ready, floods for the window and returns what the calls came to. Calls
// that fail with a retry hint wait that long before the next (at most the
// rest of the window), other failures a second; answers and timeouts are
// followed by the next call at once.
func (f flood) run(ctx context.Context, t testing.TB, target *cluster.Server) floodResult {
	t.Helper()
	before := establishedTo(t, target.RPCAddr())
	conns := make([]*grpc.ClientConn, f.conns)
	for i := range conns {
		conn, err := grpc.NewClient(target.RPCAddr(), rpc.ClientDialOptions(nil)...)
		if err != nil {
			t.Fatalf("flood: dial %s: %v", target, err)
		}
		conn.Connect()
		conns[i] = conn
	}
	defer func() {
		for _, c := range conns {
			_ = c.Close()
		}
	}()
	res := floodResult{refused: make(map[codes.Code]uint64), dialed: len(conns)}
	res.connected = waitReady(ctx, conns, 30*time.Second)
	res.established = establishedTo(t, target.RPCAddr()) - before

	var mu sync.Mutex
	var wg sync.WaitGroup
	start := time.Now()
	end := start.Add(f.window)
	req := &droverv1.ListNodesRequest{Page: &droverv1.PageOptions{PageSize: f.pageSize}}
	for i, conn := range conns {
		wg.Go(func() {
			var mine floodResult
			mine.refused = make(map[codes.Code]uint64)
			for n := 0; time.Now().Before(end) && ctx.Err() == nil; n++ {
				cctx, cancel := context.WithTimeout(ctx, f.callTimeout)
				var size int
				t0 := time.Now()
				err := conn.Invoke(cctx, droverv1.NodeService_List_FullMethodName, req, &size, grpc.ForceCodecV2(sizeCodec{}), rpc.NoRefusalRetry{})
				took := time.Since(t0)
				cancel()
				// Sample every connection's first call and every 8th.
				sample := n%8 == 0
				switch code := status.Code(err); code {
				case codes.OK:
					mine.answered++
					mine.answerBytes += int64(size)
					if sample {
						mine.answeredLatency = append(mine.answeredLatency, took)
					}
				case codes.DeadlineExceeded:
					mine.timedOut++
				default:
					mine.refused[code]++
					hint, _ := rpc.RetryHint(err)
					if hint > 0 {
						mine.withRetryInfo++
					}
					if sample {
						mine.refusedLatency = append(mine.refusedLatency, took)
					}
					// Back off as told, or a second when not told, spread
					// over the connections.
					wait := hint
					if wait <= 0 {
						wait = time.Second
					}
					sleepCtx(ctx, min(wait+time.Duration(i%16)*wait/16, time.Until(end)))
				}
			}
			mu.Lock()
			defer mu.Unlock()
			res.merge(mine)
		})
	}
	wg.Wait()
	res.took = time.Since(start)
	return res
}

func (r *floodResult) merge(o floodResult) {
	r.answered += o.answered
	r.timedOut += o.timedOut
	r.withRetryInfo += o.withRetryInfo
	r.answerBytes += o.answerBytes
	for c, n := range o.refused {
		r.refused[c] += n
	}
	r.answeredLatency = append(r.answeredLatency, o.answeredLatency...)
	r.refusedLatency = append(r.refusedLatency, o.refusedLatency...)
}

// sleepCtx waits for d or until ctx ends.
func sleepCtx(ctx context.Context, d time.Duration) {
	if d <= 0 {
		return
	}
	select {
	case <-time.After(d):
	case <-ctx.Done():
	}
}

// waitReady waits until every connection is READY or the wait ends, and
// returns how many are.
func waitReady(ctx context.Context, conns []*grpc.ClientConn, wait time.Duration) int {
	ctx, cancel := context.WithTimeout(ctx, wait)
	defer cancel()
	ready := 0
	for _, c := range conns {
		for {
			st := c.GetState()
			if st == connectivity.Ready {
				ready++
				break
			}
			if !c.WaitForStateChange(ctx, st) {
				break
			}
		}
	}
	return ready
}

// establishedTo counts the established IPv4 TCP connections (in this
// network namespace) whose remote end is addr's port: the client side of
// every connection to it.
func establishedTo(t testing.TB, addr string) int {
	t.Helper()
	_, portStr, _ := strings.Cut(addr, ":")
	port, err := strconv.Atoi(portStr)
	if err != nil {
		t.Fatalf("port of %s: %v", addr, err)
	}
	f, err := os.Open("/proc/net/tcp")
	if err != nil {
		return 0 // no /proc: not counted
	}
	defer f.Close()
	want := fmt.Sprintf(":%04X", port)
	n := 0
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		// sl local_address rem_address st ...; st 01 is ESTABLISHED.
		fields := strings.Fields(sc.Text())
		if len(fields) > 3 && strings.HasSuffix(fields[2], want) && fields[3] == "01" {
			n++
		}
	}
	return n
}

// sizeCodec sends requests with drover's codec and keeps only the size of
// answers, so that the flood spends no CPU decoding them (its client would
// be on another machine).
type sizeCodec struct{}

var _ encoding.CodecV2 = sizeCodec{}

func (sizeCodec) Name() string { return "proto" }

func (sizeCodec) Marshal(v any) (mem.BufferSlice, error) { return rpc.Codec{}.Marshal(v) }

func (sizeCodec) Unmarshal(data mem.BufferSlice, v any) error {
	size, ok := v.(*int)
	if !ok {
		return fmt.Errorf("sizeCodec: answer into %T, want *int", v)
	}
	*size = data.Len()
	return nil
}

// clusterWatch polls every server's view of raft (ClusterService.Info,
// which the servers answer themselves) and autopilot's view of every server
// (OperatorService.ServerMembers through one server) during a flood.
type clusterWatch struct {
	cancel context.CancelFunc
	wg     sync.WaitGroup

	mu sync.Mutex
	// leaders are the leader ids seen, in the order first seen; terms the
	// highest last log term each server reported.
	leaders []string
	terms   map[string]uint64
	// maxContact is the longest time since contact with the leader each
	// follower reported.
	maxContact map[string]time.Duration
	// infoFailed counts failed Info polls per server.
	infoFailed map[string]int
	// unhealthy counts the ServerMembers answers that called each server
	// unhealthy; membersOK and membersFailed count the answers.
	unhealthy                map[string]int
	membersOK, membersFailed int
}

// watchCluster polls every interval until stop; ServerMembers goes through
// via.
func watchCluster(ctx context.Context, c *cluster.Cluster, via *cluster.Server, interval time.Duration) *clusterWatch {
	ctx, cancel := context.WithCancel(ctx)
	w := &clusterWatch{cancel: cancel, terms: map[string]uint64{}, maxContact: map[string]time.Duration{},
		infoFailed: map[string]int{}, unhealthy: map[string]int{}}
	for _, s := range c.Servers() {
		w.wg.Go(func() { w.every(ctx, interval, func() { w.pollInfo(ctx, s) }) })
	}
	w.wg.Go(func() { w.every(ctx, interval, func() { w.pollMembers(ctx, via) }) })
	return w
}

func (w *clusterWatch) every(ctx context.Context, interval time.Duration, poll func()) {
	for ctx.Err() == nil {
		poll()
		sleepCtx(ctx, interval)
	}
}

func (w *clusterWatch) pollInfo(ctx context.Context, s *cluster.Server) {
	cctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	info, err := droverv1.NewClusterServiceClient(s.Conn()).Info(cctx, &droverv1.ServerInfoRequest{})
	w.mu.Lock()
	defer w.mu.Unlock()
	if err != nil {
		if ctx.Err() == nil {
			w.infoFailed[s.ID()]++
		}
		return
	}
	if l := info.GetLeaderId(); l != "" && !slices.Contains(w.leaders, l) {
		w.leaders = append(w.leaders, l)
	}
	w.terms[s.ID()] = max(w.terms[s.ID()], info.GetLastTerm())
	if info.GetRaftState() == droverv1.RaftState_RAFT_STATE_FOLLOWER {
		w.maxContact[s.ID()] = max(w.maxContact[s.ID()], info.GetLastContact().AsDuration())
	}
}

func (w *clusterWatch) pollMembers(ctx context.Context, via *cluster.Server) {
	cctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	resp, err := droverv1.NewOperatorServiceClient(via.Conn()).ServerMembers(cctx, &droverv1.ServerMembersRequest{})
	w.mu.Lock()
	defer w.mu.Unlock()
	if err != nil {
		if ctx.Err() == nil {
			w.membersFailed++
		}
		return
	}
	w.membersOK++
	for _, m := range resp.GetServers() {
		if !m.GetHealthy() {
			w.unhealthy[m.GetId()]++
		}
	}
}

// stop ends the polls and waits for them.
func (w *clusterWatch) stop() {
	w.cancel()
	w.wg.Wait()
}

// term is the highest last log term any server reported.
func (w *clusterWatch) term() uint64 {
	w.mu.Lock()
	defer w.mu.Unlock()
	var t uint64
	for _, v := range w.terms {
		t = max(t, v)
	}
	return t
}

func (w *clusterWatch) String() string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return fmt.Sprintf("leaders seen %v, max follower last contact %v, Info polls failed %v; ServerMembers: %d answers, %d failed, unhealthy %v",
		w.leaders, roundAll(w.maxContact), w.infoFailed, w.membersOK, w.membersFailed, w.unhealthy)
}

func roundAll(m map[string]time.Duration) map[string]time.Duration {
	out := make(map[string]time.Duration, len(m))
	for k, v := range m {
		out[k] = v.Round(time.Millisecond)
	}
	return out
}

// unhealthyLogged counts the "server became unhealthy" lines autopilot
// logged on any server at or after since.
func unhealthyLogged(c *cluster.Cluster, since time.Time) int {
	n := 0
	for _, s := range c.Servers() {
		for _, rec := range s.LogRecords() {
			if rec["msg"] != "server became unhealthy" {
				continue
			}
			if at, err := time.Parse(time.RFC3339Nano, fmt.Sprint(rec["time"])); err == nil && !at.Before(since) {
				n++
			}
		}
	}
	return n
}
