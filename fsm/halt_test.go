package fsm

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"strings"
	"sync"
	"testing"

	"github.com/hashicorp/raft"

	"github.com/droverhq/drover/fsm/state"
	"github.com/droverhq/drover/internal/mock"
	droverv1 "github.com/droverhq/drover/proto/drover/v1"
)

// logBuffer collects an FSM's JSON log lines.
type logBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *logBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *logBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// newLoggedHarness is newHarness with the FSM's log kept, running as
// release v that knows the types known says.
func newLoggedHarness(t *testing.T, v string, known func(droverv1.MessageType) bool) (*harness, *logBuffer) {
	t.Helper()
	h := newHarness(t)
	logs := &logBuffer{}
	h.fsm.logger = slog.New(slog.NewJSONHandler(logs, nil))
	h.fsm.SetRelease(Release{Version: v, Knows: known})
	return h, logs
}

// olderRelease knows every type but cluster metadata, as 0.1.0 does.
func olderRelease(t droverv1.MessageType) bool { return t != droverv1.MessageTypeClusterMetadata }

func TestApplySkipsUnknownIgnorableTypes(t *testing.T) {
	h, logs := newLoggedHarness(t, "0.1.0", olderRelease)
	h.populate()
	before := h.fsm.State().Snapshot()
	for _, data := range [][]byte{
		{byte(droverv1.IgnoreUnknownTypeFlag) | 100, 1, 2, 3}, // a type no release knows
		mustEncode(t, droverv1.MessageTypeClusterMetadata, &droverv1.ClusterMetadataEntry{Metadata: &droverv1.ClusterMetadata{ClusterId: "c1"}}),
	} {
		h.index++
		if resp := h.fsm.Apply(&raft.Log{Index: h.index, Data: data}); resp != nil {
			t.Errorf("ignorable entry of type %d: response %v, want nil", data[0], resp)
		}
		if got := h.fsm.State().LatestIndex(); got != h.index {
			t.Errorf("latest index after an ignored entry = %d, want %d", got, h.index)
		}
	}
	if diff := stateDiff(before, h.fsm.State().Snapshot()); diff != "" {
		t.Errorf("skipped entries changed the state:\n%s", diff)
	}
	if got := logs.String(); strings.Count(got, `"msg":"skipping raft entry of unknown ignorable type"`) != 2 ||
		!strings.Contains(got, `"level":"WARN"`) || !strings.Contains(got, `"type":"ClusterMetadata"`) {
		t.Errorf("log does not warn about both skipped entries:\n%s", got)
	}
	if h.fsm.Halted() != nil {
		t.Errorf("skipping an ignorable entry halted the FSM: %v", h.fsm.Halted())
	}
	// The same entries are applied by a release that knows them.
	cur, _ := newLoggedHarness(t, "0.2.0", nil)
	cur.mustApply(droverv1.MessageTypeClusterMetadata, &droverv1.ClusterMetadataEntry{Metadata: &droverv1.ClusterMetadata{ClusterId: "c1"}})
	if got := cur.fsm.State().Snapshot().ClusterMetadata().GetClusterId(); got != "c1" {
		t.Errorf("cluster id %q after the entry, want c1", got)
	}
}

func TestApplyHaltsOnEntriesItCannotApply(t *testing.T) {
	// A release that predates node drains, to see that a type the source
	// could decode is unknown to a release that does not know it.
	beforeDrains := func(t droverv1.MessageType) bool { return olderRelease(t) && t != droverv1.MessageTypeNodeDrain }
	drain := mustEncode(t, droverv1.MessageTypeNodeDrain, &droverv1.NodeDrainEntry{NodeId: mock.Node().GetId()})
	for name, data := range map[string][]byte{
		"unknown type":                {99, 1, 2},
		"empty entry":                 nil,
		"corrupt entry":               {byte(droverv1.MessageTypeNodeRegister), 0xff, 0xff, 0xff},
		"type newer than its release": drain,
	} {
		t.Run(name, func(t *testing.T) {
			h, logs := newLoggedHarness(t, "0.1.0", beforeDrains)
			h.populate()
			before := h.fsm.State().Snapshot()
			beforeIndex := h.fsm.State().LatestIndex()
			h.index++
			haltIndex := h.index
			resp := h.fsm.Apply(&raft.Log{Index: haltIndex, Data: data})
			halt, ok := resp.(*Halt)
			if !ok {
				t.Fatalf("response %T %v, want a *Halt", resp, resp)
			}
			if h.fsm.Halted() != halt || halt.Index != haltIndex || halt.Version != "0.1.0" {
				t.Errorf("Halted() = %+v, want the response at index %d for release 0.1.0", h.fsm.Halted(), haltIndex)
			}
			select {
			case <-h.fsm.HaltCh():
			default:
				t.Error("HaltCh not closed")
			}
			if name == "unknown type" && (!errors.Is(halt, ErrUnknownType) || !strings.Contains(halt.Error(), "upgrade this server") ||
				!strings.Contains(halt.Error(), fmt.Sprintf("index %d", haltIndex)) || !strings.Contains(halt.Error(), "MessageType(99)") || !strings.Contains(halt.Error(), "0.1.0")) {
				t.Errorf("reason %q: want the index, the type, the release and what to do", halt.Error())
			}
			if !strings.Contains(logs.String(), `"level":"ERROR","msg":"stopped applying the raft log"`) {
				t.Errorf("no ERROR log of the halt:\n%s", logs.String())
			}

			// Nothing more is applied, ignorable or not.
			n := mock.Node()
			for _, next := range [][]byte{
				mustEncode(t, droverv1.MessageTypeNodeRegister, &droverv1.NodeRegisterEntry{Nodes: []*droverv1.Node{n}}),
				{byte(droverv1.IgnoreUnknownTypeFlag) | 100},
			} {
				h.index++
				if resp := h.fsm.Apply(&raft.Log{Index: h.index, Data: next}); resp != halt {
					t.Errorf("entry after the halt: response %v, want the halt", resp)
				}
			}
			if got := h.fsm.State().LatestIndex(); got != beforeIndex {
				t.Errorf("latest index %d after the halt, want %d", got, beforeIndex)
			}
			if diff := stateDiff(before, h.fsm.State().Snapshot()); diff != "" {
				t.Errorf("the halted FSM changed its state:\n%s", diff)
			}
			if _, err := h.fsm.Snapshot(); !errors.Is(err, halt) {
				t.Errorf("Snapshot after the halt: %v, want a refusal naming the halt", err)
			}
			var snap bytes.Buffer
			if err := WriteSnapshot(&snap, before, beforeIndex); err != nil {
				t.Fatal(err)
			}
			if err := h.fsm.Restore(io.NopCloser(&snap)); !errors.Is(err, halt) {
				t.Errorf("Restore after the halt: %v, want a refusal naming the halt", err)
			}
		})
	}
}

func TestClusterMetadataFirstWriteStays(t *testing.T) {
	h := newHarness(t)
	first := h.mustApply(droverv1.MessageTypeClusterMetadata, &droverv1.ClusterMetadataEntry{Metadata: &droverv1.ClusterMetadata{ClusterId: "c1", CreatedAt: 10}})
	firstIndex := h.index
	second := h.mustApply(droverv1.MessageTypeClusterMetadata, &droverv1.ClusterMetadataEntry{Metadata: &droverv1.ClusterMetadata{ClusterId: "c2", CreatedAt: 20}})
	m := h.fsm.State().Snapshot().ClusterMetadata()
	if m.GetClusterId() != "c1" || m.GetCreatedAt() != 10 || m.GetCreateIndex() != firstIndex {
		t.Errorf("stored %v, want the first write (c1 at index %d)", m, firstIndex)
	}
	if first.(*droverv1.ClusterMetadata).GetClusterId() != "c1" || second.(*droverv1.ClusterMetadata).GetClusterId() != "c1" {
		t.Errorf("responses %v and %v, want the stored metadata both times", first, second)
	}
	if resp := h.apply(droverv1.MessageTypeClusterMetadata, &droverv1.ClusterMetadataEntry{}); !errors.Is(resp.(error), state.ErrInvalidEntry) {
		t.Errorf("entry without metadata: %v, want ErrInvalidEntry", resp)
	}
}

// TestSnapshotClusterMetadata checks that the metadata survives a
// snapshot, and that a release that does not know it restores the rest.
func TestSnapshotClusterMetadata(t *testing.T) {
	h := newHarness(t)
	h.populate()
	h.mustApply(droverv1.MessageTypeClusterMetadata, &droverv1.ClusterMetadataEntry{Metadata: &droverv1.ClusterMetadata{ClusterId: "c1", CreatedAt: 10}})
	var buf bytes.Buffer
	if err := WriteSnapshot(&buf, h.fsm.State().Snapshot(), h.index); err != nil {
		t.Fatal(err)
	}
	data := buf.Bytes()

	cur, _ := newLoggedHarness(t, "0.2.0", nil)
	if err := cur.fsm.Restore(io.NopCloser(bytes.NewReader(data))); err != nil {
		t.Fatal(err)
	}
	if diff := stateDiff(h.fsm.State().Snapshot(), cur.fsm.State().Snapshot()); diff != "" {
		t.Errorf("restored state differs:\n%s", diff)
	}
	if got := cur.fsm.State().Snapshot().ClusterMetadata(); got.GetClusterId() != "c1" || got.GetCreateIndex() != h.index {
		t.Errorf("restored metadata %v, want c1 at index %d", got, h.index)
	}

	old, logs := newLoggedHarness(t, "0.1.0", olderRelease)
	if err := old.fsm.Restore(io.NopCloser(bytes.NewReader(data))); err != nil {
		t.Fatal(err)
	}
	if got := old.fsm.State().Snapshot(); got.ClusterMetadata() != nil || got.NodeByID(h.fsm.State().Snapshot().ClusterMetadata().GetClusterId()) != nil {
		t.Errorf("a release that does not know cluster metadata restored it: %v", got.ClusterMetadata())
	}
	if diff := stateDiff(h.fsm.State().Snapshot(), old.fsm.State().Snapshot()); strings.Contains(diff, "nodes") || strings.Contains(diff, "jobs") {
		t.Errorf("the older release did not restore the rest:\n%s", diff)
	}
	if !strings.Contains(logs.String(), "skipping the snapshot's cluster metadata") {
		t.Errorf("no warning about the skipped metadata:\n%s", logs.String())
	}
}

func mustEncode(t *testing.T, msgType droverv1.MessageType, msg vtMessage) []byte {
	t.Helper()
	data, err := Encode(msgType, msg)
	if err != nil {
		t.Fatal(err)
	}
	return data
}
