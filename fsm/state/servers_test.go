package state

import (
	"errors"
	"slices"
	"testing"

	droverv1 "github.com/droverhq/drover/proto/drover/v1"
)

func mockServer(id, version string) *droverv1.ServerMember {
	return &droverv1.ServerMember{Id: id, RpcAddr: id + ":4647", RaftAddr: id + ":4648", Version: version}
}

func TestUpsertServer(t *testing.T) {
	renamed := mockServer("s1", "0.1.0")
	renamed.RpcAddr = "10.0.0.9:4647"
	tests := []struct {
		name string
		// existing is written at index 1 before the upsert under test.
		existing *droverv1.ServerMember
		upsert   *droverv1.ServerMember
		// wantChange says whether the upsert writes; the record then has
		// create index wantCreate and modify index 2.
		wantChange bool
		wantCreate uint64
	}{
		{name: "create", upsert: mockServer("s1", "0.1.0"), wantChange: true, wantCreate: 2},
		{name: "update keeps create index", existing: mockServer("s1", "0.1.0"), upsert: mockServer("s1", "0.2.0"), wantChange: true, wantCreate: 1},
		{name: "new address", existing: mockServer("s1", "0.1.0"), upsert: renamed, wantChange: true, wantCreate: 1},
		{name: "equal is a no-op", existing: mockServer("s1", "0.1.0"), upsert: mockServer("s1", "0.1.0"), wantCreate: 1},
		{name: "equal but for indexes is a no-op", existing: mockServer("s1", "0.1.0"),
			upsert: &droverv1.ServerMember{Id: "s1", RpcAddr: "s1:4647", RaftAddr: "s1:4648", Version: "0.1.0", CreateIndex: 9, ModifyIndex: 9}, wantCreate: 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s, err := NewStateStore()
			if err != nil {
				t.Fatal(err)
			}
			if tt.existing != nil {
				if _, err := s.UpsertServer(1, &droverv1.ServerUpsertEntry{Server: tt.existing.CloneVT()}); err != nil {
					t.Fatal(err)
				}
			}
			before := s.Snapshot()
			want := tt.upsert.CloneVT()
			changes, err := s.UpsertServer(2, &droverv1.ServerUpsertEntry{Server: tt.upsert})
			if err != nil {
				t.Fatal(err)
			}
			after := s.Snapshot()
			got := after.ServerByID("s1")
			if !tt.wantChange {
				if len(changes) != 0 || after.TableIndex(TableServers) != 1 || got != before.ServerByID("s1") {
					t.Errorf("no-op upsert wrote: %d changes, table index %d", len(changes), after.TableIndex(TableServers))
				}
				return
			}
			if len(changes) != 1 || changes[0].Table != TableServers || changes[0].Created != (tt.existing == nil) {
				t.Errorf("changes = %+v, want one server change (created %v)", changes, tt.existing == nil)
			}
			if after.TableIndex(TableServers) != 2 {
				t.Errorf("servers table index = %d, want 2", after.TableIndex(TableServers))
			}
			want.CreateIndex, want.ModifyIndex = tt.wantCreate, 2
			if !got.EqualVT(want) {
				t.Errorf("stored %v, want %v", got, want)
			}
		})
	}
}

func TestUpsertServerRejectsIncompleteRecords(t *testing.T) {
	f := newFixture(t)
	tests := []struct {
		name string
		m    *droverv1.ServerMember
	}{
		{"no server", nil},
		{"no id", &droverv1.ServerMember{RpcAddr: "a:1", RaftAddr: "a:2"}},
		{"no rpc address", &droverv1.ServerMember{Id: "s1", RaftAddr: "a:2"}},
		{"no raft address", &droverv1.ServerMember{Id: "s1", RpcAddr: "a:1"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if _, err := f.s.UpsertServer(f.next(), &droverv1.ServerUpsertEntry{Server: tt.m}); !errors.Is(err, ErrInvalidEntry) {
				t.Fatalf("err = %v, want ErrInvalidEntry", err)
			}
			if f.s.Snapshot().ServerByID("s1") != nil {
				t.Errorf("refused entry wrote a server")
			}
		})
	}
}

func TestRemoveServer(t *testing.T) {
	f := newFixture(t)
	for _, id := range []string{"s3", "s1", "s2"} {
		if _, err := f.s.UpsertServer(f.next(), &droverv1.ServerUpsertEntry{Server: mockServer(id, "0.1.0")}); err != nil {
			t.Fatal(err)
		}
	}
	var listed []string
	for m := range f.s.Snapshot().Servers() {
		listed = append(listed, m.GetId())
	}
	if !slices.Equal(listed, []string{"s1", "s2", "s3"}) {
		t.Errorf("servers = %v, want in id order", listed)
	}

	tests := []struct {
		name        string
		id          string
		wantDeleted bool
		wantErr     error
	}{
		{name: "known", id: "s2", wantDeleted: true},
		{name: "missing is a no-op", id: "s9"},
		{name: "again is a no-op", id: "s2"},
		{name: "no id", id: "", wantErr: ErrInvalidEntry},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			before := f.s.Snapshot().TableIndex(TableServers)
			index := f.next()
			changes, err := f.s.RemoveServer(index, &droverv1.ServerRemoveEntry{ServerId: tt.id})
			if !errors.Is(err, tt.wantErr) {
				t.Fatalf("err = %v, want %v", err, tt.wantErr)
			}
			snap := f.s.Snapshot()
			if tt.wantDeleted {
				if len(changes) != 1 || !changes[0].Deleted || changes[0].Object.(*droverv1.ServerMember).GetId() != tt.id {
					t.Errorf("changes = %+v, want the deletion of %s", changes, tt.id)
				}
				if snap.ServerByID(tt.id) != nil || snap.TableIndex(TableServers) != index {
					t.Errorf("server %s still stored or table index %d, want %d", tt.id, snap.TableIndex(TableServers), index)
				}
				return
			}
			if len(changes) != 0 || snap.TableIndex(TableServers) != before {
				t.Errorf("no-op removal wrote: %d changes, table index %d -> %d", len(changes), before, snap.TableIndex(TableServers))
			}
		})
	}
	if f.s.Snapshot().ServerByID("s1") == nil || f.s.Snapshot().ServerByID("s3") == nil {
		t.Errorf("removals touched other servers")
	}
}
