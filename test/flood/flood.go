// Package flood is an operator flood against one drover server: many
// client connections, each calling NodeService.List for a whole fleet
// again and again for a fixed window. The tests run it from its own
// process (floodclient), built without the race detector, so that the
// flood's client costs what it would on another machine and does not
// starve the simulated agents in the test process.
package flood

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
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/connectivity"
	"google.golang.org/grpc/encoding"
	"google.golang.org/grpc/mem"
	"google.golang.org/grpc/status"

	droverv1 "github.com/droverhq/drover/proto/drover/v1"
	"github.com/droverhq/drover/rpc"
)

// Config is one flood.
type Config struct {
	// Addr is the gRPC address of the server flooded.
	Addr string
	// Conns is how many client connections the flood opens, each its own
	// grpc.ClientConn and so its own TCP connection.
	Conns int
	// Window is how long new calls are started; calls in flight at its end
	// run to their deadline.
	Window time.Duration
	// CallTimeout is each call's deadline.
	CallTimeout time.Duration
	// PageSize is the page asked for: the whole fleet, so that every call
	// serialises every node.
	PageSize int32
}

// Result is what a flood's calls came to.
type Result struct {
	Answered uint64 `json:"answered"`
	// TimedOut counts calls that ended in DeadlineExceeded.
	TimedOut uint64 `json:"timed_out"`
	// Refused counts the other failures by code; WithRetryInfo those of
	// them that carried a RetryInfo hint.
	Refused       map[codes.Code]uint64 `json:"refused"`
	WithRetryInfo uint64                `json:"with_retry_info"`
	// AnswerBytes is the size of the answers received.
	AnswerBytes int64 `json:"answer_bytes"`
	// AnsweredLatency and RefusedLatency sample calls' durations: every
	// connection's first call and every 8th.
	AnsweredLatency []time.Duration `json:"answered_latency"`
	RefusedLatency  []time.Duration `json:"refused_latency"`
	// Dialed counts the flood's connections, Connected those that reached
	// READY before the window, Established the TCP connections to the
	// target the kernel listed then, beyond those there were before the
	// flood dialed.
	Dialed      int `json:"dialed"`
	Connected   int `json:"connected"`
	Established int `json:"established"`
	// Took is from the start of the window to the end of the last call.
	Took time.Duration `json:"took"`
}

// Refusals is the number of calls refused (any code but OK and
// DeadlineExceeded).
func (r Result) Refusals() uint64 {
	var n uint64
	for _, v := range r.Refused {
		n += v
	}
	return n
}

func (r Result) String() string {
	var refused []string
	for _, c := range slices.Sorted(maps.Keys(r.Refused)) {
		refused = append(refused, fmt.Sprintf("%s=%d", c, r.Refused[c]))
	}
	return fmt.Sprintf("%d connections (%d ready, %d established), %s: answered %d (%.1f MB, p50 %s, p99 %s), refused %d [%s] (%d with RetryInfo, p99 %s), timed out %d",
		r.Dialed, r.Connected, r.Established, r.Took.Round(time.Second), r.Answered, float64(r.AnswerBytes)/1e6,
		percentile(r.AnsweredLatency, 50), percentile(r.AnsweredLatency, 99),
		r.Refusals(), strings.Join(refused, " "), r.WithRetryInfo, percentile(r.RefusedLatency, 99), r.TimedOut)
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

// Run dials the connections, waits (at most 30s) until they are ready,
// floods for the window and returns what the calls came to. Calls that
// fail with a retry hint wait that long before the next (at most the rest
// of the window), other failures a second; answers and timeouts are
// followed by the next call at once.
func Run(ctx context.Context, cfg Config) (Result, error) {
	before, err := establishedTo(cfg.Addr)
	if err != nil {
		return Result{}, err
	}
	conns := make([]*grpc.ClientConn, cfg.Conns)
	defer func() {
		for _, c := range conns {
			if c != nil {
				_ = c.Close()
			}
		}
	}()
	for i := range conns {
		conn, err := grpc.NewClient(cfg.Addr, rpc.ClientDialOptions(nil)...)
		if err != nil {
			return Result{}, fmt.Errorf("flood: dial %s: %w", cfg.Addr, err)
		}
		conn.Connect()
		conns[i] = conn
	}
	res := Result{Refused: make(map[codes.Code]uint64), Dialed: len(conns)}
	res.Connected = waitReady(ctx, conns, 30*time.Second)
	after, err := establishedTo(cfg.Addr)
	if err != nil {
		return Result{}, err
	}
	res.Established = after - before

	var mu sync.Mutex
	var wg sync.WaitGroup
	start := time.Now()
	end := start.Add(cfg.Window)
	for i, conn := range conns {
		wg.Go(func() {
			mine := floodConn(ctx, cfg, conn, end, i)
			mu.Lock()
			defer mu.Unlock()
			res.merge(mine)
		})
	}
	wg.Wait()
	res.Took = time.Since(start)
	return res, nil
}

// floodConn calls on conn until end; i spreads the backoff of the
// connections.
func floodConn(ctx context.Context, cfg Config, conn *grpc.ClientConn, end time.Time, i int) Result {
	req := &droverv1.ListNodesRequest{Page: &droverv1.PageOptions{PageSize: cfg.PageSize}}
	mine := Result{Refused: make(map[codes.Code]uint64)}
	for n := 0; time.Now().Before(end) && ctx.Err() == nil; n++ {
		cctx, cancel := context.WithTimeout(ctx, cfg.CallTimeout)
		var size int
		t0 := time.Now()
		err := conn.Invoke(cctx, droverv1.NodeService_List_FullMethodName, req, &size, grpc.ForceCodecV2(sizeCodec{}), rpc.NoRefusalRetry{})
		took := time.Since(t0)
		cancel()
		sample := n%8 == 0
		switch code := status.Code(err); code {
		case codes.OK:
			mine.Answered++
			mine.AnswerBytes += int64(size)
			if sample {
				mine.AnsweredLatency = append(mine.AnsweredLatency, took)
			}
		case codes.DeadlineExceeded:
			mine.TimedOut++
		default:
			mine.Refused[code]++
			hint, _ := rpc.RetryHint(err)
			if hint > 0 {
				mine.WithRetryInfo++
			}
			if sample {
				mine.RefusedLatency = append(mine.RefusedLatency, took)
			}
			// Back off as told, or a second when not told, spread over
			// the connections.
			wait := hint
			if wait <= 0 {
				wait = time.Second
			}
			sleepCtx(ctx, min(wait+time.Duration(i%16)*wait/16, time.Until(end)))
		}
	}
	return mine
}

func (r *Result) merge(o Result) {
	r.Answered += o.Answered
	r.TimedOut += o.TimedOut
	r.WithRetryInfo += o.WithRetryInfo
	r.AnswerBytes += o.AnswerBytes
	for c, n := range o.Refused {
		r.Refused[c] += n
	}
	r.AnsweredLatency = append(r.AnsweredLatency, o.AnsweredLatency...)
	r.RefusedLatency = append(r.RefusedLatency, o.RefusedLatency...)
}

// sleepCtx waits for d or until ctx ends.
func sleepCtx(ctx context.Context, d time.Duration) {
	if d <= 0 {
		return
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
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
// every connection to it. Without /proc it counts none.
func establishedTo(addr string) (int, error) {
	_, portStr, _ := strings.Cut(addr, ":")
	port, err := strconv.Atoi(portStr)
	if err != nil {
		return 0, fmt.Errorf("flood: port of %s: %w", addr, err)
	}
	f, err := os.Open("/proc/net/tcp")
	if err != nil {
		return 0, nil
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
	return n, nil
}

// sizeCodec sends requests with drover's codec and keeps only the size of
// answers, so that the flood spends no CPU decoding them.
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
