package server

import (
	"errors"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/hashicorp/raft"

	droverv1 "github.com/droverhq/drover/proto/drover/v1"
	"github.com/droverhq/drover/server/raftnode"
)

type nopFSM struct{}

func (nopFSM) Apply(*raft.Log) any                 { return nil }
func (nopFSM) Snapshot() (raft.FSMSnapshot, error) { return nil, errors.New("no snapshots") }
func (nopFSM) Restore(io.ReadCloser) error         { return nil }

// withRaftState gives dataDir the raft state of server id: raftnode records
// the id in raft.db when it first opens it.
func withRaftState(t *testing.T, dataDir, id string) {
	t.Helper()
	n, err := raftnode.New(raftnode.Config{ServerID: id, DataDir: dataDir, BindAddr: "127.0.0.1:0", FSM: nopFSM{},
		Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		t.Fatal(err)
	}
	if err := n.Shutdown(); err != nil {
		t.Fatal(err)
	}
}

func TestServerID(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		// file is the server-id file's content; "-" for none.
		file string
		// state is the id raft.db records; "" for no raft state.
		state string
		want  string // -server-id
		// wantID is the id returned; wantErr a part of the error.
		wantID, wantErr string
		damaged         bool
	}{
		{name: "first start, id given", file: "-", want: "s1", wantID: "s1"},
		{name: "first start, id generated", file: "-", wantID: "<uuid>"},
		{name: "id from the file", file: "s1\n", state: "s1", wantID: "s1"},
		{name: "id from the file and the flag", file: "s1\n", state: "s1", want: "s1", wantID: "s1"},
		{name: "another id asked for", file: "s1\n", state: "s1", want: "s2", wantErr: `belongs to server "s1", not "s2"`},
		{name: "garbled file", file: "s\x00\x01\xff", state: "s1", damaged: true,
			wantErr: `does not hold a valid server id: "s\x00\x01\xff" is not 1 to 128 characters of UTF-8; raft.db records server "s1": remove the file and start with -server-id s1`},
		{name: "empty file", file: "", state: "s1", damaged: true, wantErr: "does not hold a valid server id"},
		{name: "id with a space", file: "s 1", damaged: true, wantErr: "holds a space"},
		{name: "file disagrees with raft.db", file: "s0\n", state: "s1", damaged: true, wantErr: `says "s0" but raft.db records server "s1"`},
		{name: "file missing beside raft state", file: "-", state: "s1", damaged: true,
			wantErr: `is missing, but the data dir holds raft state; raft.db records server "s1"`},
		{name: "file missing, id given again", file: "-", state: "s1", want: "s1", wantID: "s1"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			dir := t.TempDir()
			if tt.state != "" {
				withRaftState(t, dir, tt.state)
			}
			path := filepath.Join(dir, serverIDFile)
			if tt.file != "-" {
				if err := os.WriteFile(path, []byte(tt.file), 0o600); err != nil {
					t.Fatal(err)
				}
			}
			id, err := serverID(dir, tt.want)
			if tt.wantErr != "" {
				var d *raftnode.DamageError
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) || errors.As(err, &d) != tt.damaged ||
					tt.damaged && d.File != path {
					t.Fatalf("serverID = %q, %v; want an error saying %q (damage to %s: %v)", id, err, tt.wantErr, path, tt.damaged)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if tt.wantID == "<uuid>" && len(id) == 36 || id == tt.wantID {
				stored, _ := os.ReadFile(path)
				if strings.TrimSpace(string(stored)) != id {
					t.Fatalf("server-id file holds %q, want %q", stored, id)
				}
				return
			}
			t.Fatalf("serverID = %q, want %q", id, tt.wantID)
		})
	}
}

func TestSpareCheck(t *testing.T) {
	t.Parallel()
	peer := func(id string, voter bool) *droverv1.RaftPeer { return &droverv1.RaftPeer{Id: id, Voter: voter} }
	health := func(ids ...string) *droverv1.ServerMembersResponse {
		resp := &droverv1.ServerMembersResponse{}
		for _, id := range ids {
			resp.Servers = append(resp.Servers, &droverv1.ServerHealth{Id: id, Healthy: true})
		}
		return resp
	}
	tests := []struct {
		name     string
		peers    []*droverv1.RaftPeer
		healthy  *droverv1.ServerMembersResponse
		inConfig bool
		wantErr  string
	}{
		{"three servers, others healthy", []*droverv1.RaftPeer{peer("s1", true), peer("s2", true), peer("s3", true)}, health("s2", "s3"), true, ""},
		{"already removed", []*droverv1.RaftPeer{peer("s2", true), peer("s3", true)}, health("s2", "s3"), false, ""},
		{"three servers, one other down", []*droverv1.RaftPeer{peer("s1", true), peer("s2", true), peer("s3", true)}, health("s2"), false,
			"only 1 of the other voters [s2 s3] are healthy ([s2]), fewer than the 2"},
		{"five servers, one other down", []*droverv1.RaftPeer{peer("s1", true), peer("s2", true), peer("s3", true), peer("s4", true), peer("s5", true)},
			health("s2", "s3", "s4"), true, ""},
		{"single server", []*droverv1.RaftPeer{peer("s1", true)}, health(), false, "single-server cluster has no peer"},
		{"only a non-voter besides", []*droverv1.RaftPeer{peer("s1", true), peer("s2", false)}, health("s2"), false, "single-server cluster has no peer"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			inConfig, err := spareCheck("peer:4650", "s1", &droverv1.RaftListPeersResponse{Peers: tt.peers}, tt.healthy)
			switch {
			case tt.wantErr == "" && (err != nil || inConfig != tt.inConfig):
				t.Fatalf("spareCheck = %v, %v; want %v, nil", inConfig, err, tt.inConfig)
			case tt.wantErr != "" && (!errors.Is(err, errCannotSpare) || !strings.Contains(err.Error(), tt.wantErr)):
				t.Fatalf("spareCheck = %v; want errCannotSpare saying %q", err, tt.wantErr)
			}
		})
	}
}
