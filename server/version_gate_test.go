package server

import (
	"errors"
	"io"
	"strings"
	"testing"
	"time"

	"github.com/hashicorp/raft"

	"github.com/droverhq/drover/fsm/state"
	droverv1 "github.com/droverhq/drover/proto/drover/v1"
	"github.com/droverhq/drover/rpc"
)

func TestKnows(t *testing.T) {
	meta := droverv1.MessageTypeClusterMetadata
	for _, tc := range []struct {
		version string
		t       droverv1.MessageType
		want    bool
	}{
		{"0.1.0", droverv1.MessageTypeNodeRegister, true},
		{"0.1.0", droverv1.MessageTypeAllocTransition, true},
		{"0.1.0", meta, false},
		{"0.1.9", meta, false},
		{"0.2.0-dev", meta, true},
		{"0.2.0", meta, true},
		{"1.0.0", meta, true},
		{"0.2.0", droverv1.MessageTypeAllocClientReport, false},
		{"0.3.0-dev", droverv1.MessageTypeAllocClientReport, true},
		{"0.2.0", droverv1.MessageType(99), false},
		{"0.2.0", droverv1.IgnoreUnknownTypeFlag | 99, false},
		{"", droverv1.MessageTypeNodeRegister, false},
		{"garbage", droverv1.MessageTypeNodeRegister, false},
	} {
		if got := knows(tc.version, tc.t); got != tc.want {
			t.Errorf("knows(%q, %s) = %v, want %v", tc.version, tc.t, got, tc.want)
		}
	}
}

// startRaft runs a single-server in-memory raft that leads.
func startRaft(t testing.TB, id string) *raft.Raft {
	t.Helper()
	addr, trans := raft.NewInmemTransport("")
	rc := raft.DefaultConfig()
	rc.LocalID = raft.ServerID(id)
	rc.LogOutput = io.Discard
	logs, stable, snaps := raft.NewInmemStore(), raft.NewInmemStore(), raft.NewInmemSnapshotStore()
	conf := raft.Configuration{Servers: []raft.Server{{Suffrage: raft.Voter, ID: rc.LocalID, Address: addr}}}
	if err := raft.BootstrapCluster(rc, logs, stable, snaps, trans, conf); err != nil {
		t.Fatal(err)
	}
	r, err := raft.NewRaft(rc, &raft.MockFSM{}, logs, stable, snaps, trans)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = r.Shutdown().Error() })
	select {
	case <-r.LeaderCh():
	case <-time.After(10 * time.Second):
		t.Fatal("raft did not elect itself")
	}
	return r
}

func TestVersionGate(t *testing.T) {
	r := startRaft(t, "s1")
	st, err := state.NewStateStore()
	if err != nil {
		t.Fatal(err)
	}
	g := newVersionGate(r, st)
	index := uint64(0)
	announce := func(id, v string) {
		t.Helper()
		index++
		m := &droverv1.ServerMember{Id: id, RpcAddr: id + ":4650", RaftAddr: id + ":4651", Version: v}
		if _, err := st.UpsertServer(index, &droverv1.ServerUpsertEntry{Server: m}); err != nil {
			t.Fatal(err)
		}
	}
	meta := droverv1.MessageTypeClusterMetadata
	wantBehind := func(step, behind string) {
		t.Helper()
		err := g.check(meta)
		if behind == "" {
			if err != nil {
				t.Errorf("%s: %v, want the type allowed", step, err)
			}
			return
		}
		if !errors.Is(err, rpc.ErrFailedPrecondition) || !strings.Contains(err.Error(), "servers are behind: "+behind+";") {
			t.Errorf("%s: %v, want FAILED_PRECONDITION naming %s", step, err, behind)
		}
	}

	// Types of the first release are never gated, not even before any
	// server has announced itself.
	if err := g.check(droverv1.MessageTypeNodeRegister); err != nil {
		t.Errorf("first-release type: %v", err)
	}
	wantBehind("nothing announced", "s1 (not announced)")
	announce("s1", "0.1.0")
	wantBehind("s1 announced 0.1.0", "s1 (0.1.0)")
	cached := g.view.Load()
	wantBehind("nothing changed", "s1 (0.1.0)")
	if g.view.Load() != cached {
		t.Error("the view was computed again though neither the servers nor the configuration changed")
	}
	announce("s1", "0.2.0-dev")
	wantBehind("s1 upgraded", "")

	// A configuration change is noticed without any servers table write.
	if err := r.AddNonvoter("s2", "s2:4651", 0, 10*time.Second).Error(); err != nil {
		t.Fatal(err)
	}
	wantBehind("s2 added", "s2 (not announced)")
	announce("s2", "0.1.0")
	announce("s3", "0.1.0") // recorded, but not in the configuration
	wantBehind("s2 announced 0.1.0", "s2 (0.1.0)")
	announce("s2", "0.2.0")
	wantBehind("s2 upgraded", "")
	if err := r.RemoveServer("s2", 0, 10*time.Second).Error(); err != nil {
		t.Fatal(err)
	}
	announce("s2", "0.1.0") // a removed server's record does not count
	wantBehind("s2 removed", "")

	if err := g.check(droverv1.MessageType(99)); !errors.Is(err, rpc.ErrFailedPrecondition) {
		t.Errorf("type not in the table: %v, want FAILED_PRECONDITION", err)
	}
}

func TestDescribeServers(t *testing.T) {
	got := describeServers([]serverVersion{{id: "s1", version: "0.1.0"}, {id: "s2"}})
	if want := "s1 (0.1.0), s2 (not announced)"; got != want {
		t.Errorf("describeServers = %q, want %q", got, want)
	}
}

// BenchmarkVersionGateCheck measures the gate on the write path: a type of
// the first release (every write today) and a gated type whose servers
// have not changed since the last check.
func BenchmarkVersionGateCheck(b *testing.B) {
	r := startRaft(b, "s1")
	st, err := state.NewStateStore()
	if err != nil {
		b.Fatal(err)
	}
	m := &droverv1.ServerMember{Id: "s1", RpcAddr: "s1:4650", RaftAddr: "s1:4651", Version: "0.2.0"}
	if _, err := st.UpsertServer(1, &droverv1.ServerUpsertEntry{Server: m}); err != nil {
		b.Fatal(err)
	}
	g := newVersionGate(r, st)
	for _, t := range []droverv1.MessageType{droverv1.MessageTypeNodeRegister, droverv1.MessageTypeClusterMetadata} {
		b.Run(t.String(), func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				if err := g.check(t); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

func TestNoneAnnounced(t *testing.T) {
	tests := []struct {
		name    string
		servers []serverVersion
		want    bool
	}{
		{"a server just started", []serverVersion{{id: "s1"}}, true},
		{"several just started", []serverVersion{{id: "s1"}, {id: "s2"}}, true},
		{"one on an older release", []serverVersion{{id: "s1", version: "0.1.0"}}, false},
		{"one older, one not announced", []serverVersion{{id: "s1"}, {id: "s2", version: "0.1.0"}}, false},
	}
	for _, tt := range tests {
		if got := noneAnnounced(tt.servers); got != tt.want {
			t.Errorf("%s: noneAnnounced = %t, want %t", tt.name, got, tt.want)
		}
	}
}
