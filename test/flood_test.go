package test_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"sync"
	"testing"
	"time"

	droverv1 "github.com/droverhq/drover/proto/drover/v1"
	"github.com/droverhq/drover/test/cluster"
	"github.com/droverhq/drover/test/flood"
)

// floodClientPackage is the command that runs an operator flood.
const floodClientPackage = "github.com/droverhq/drover/test/flood/floodclient"

// floodClient is the flood command, built on first use beside droverBin.
var floodClient struct {
	once sync.Once
	bin  string
	err  error
}

// runFlood runs f against target from its own process, built without the
// race detector: in this process, the flood's client would cost more CPU
// than the servers it floods and starve the simulated agents beside it.
func runFlood(ctx context.Context, t testing.TB, target *cluster.Server, f flood.Config) flood.Result {
	t.Helper()
	floodClient.once.Do(func() {
		floodClient.bin, floodClient.err = cluster.BuildCommand(filepath.Dir(droverBin), floodClientPackage)
	})
	if floodClient.err != nil {
		t.Fatal(floodClient.err)
	}
	cmd := exec.CommandContext(ctx, floodClient.bin, "-addr", target.RPCAddr(), "-conns", strconv.Itoa(f.Conns),
		"-window", f.Window.String(), "-call-timeout", f.CallTimeout.String(), "-page-size", strconv.Itoa(int(f.PageSize)))
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("flood of %s: %v\n%s", target, err, stderr.Bytes())
	}
	var res flood.Result
	if err := json.Unmarshal(out, &res); err != nil {
		t.Fatalf("flood of %s: its result %q: %v", target, out, err)
	}
	return res
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
	tick := time.NewTicker(interval)
	defer tick.Stop()
	for {
		poll()
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
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
