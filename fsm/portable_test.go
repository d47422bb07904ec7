package fsm

import (
	"bytes"
	"io"
	"log/slog"
	"maps"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/droverhq/drover/fsm/state"
	"github.com/droverhq/drover/internal/mock"
	droverv1 "github.com/droverhq/drover/proto/drover/v1"
)

// bad is not valid UTF-8; repaired it reads "a\uFFFDb".
const (
	bad      = "a\x80b"
	repaired = "a\uFFFDb"
)

// oldEntries are entries an older server let into the log: strings in a
// node, a job and an allocation report that are not valid UTF-8.
func oldEntries() (*droverv1.Node, *droverv1.Job, []struct {
	t droverv1.MessageType
	m vtMessage
}) {
	n := mock.Node()
	n.Name = bad
	n.Attributes[bad] = "x"
	n.Attributes["rack"] = bad
	job := mock.Job(1)
	job.Meta = map[string]string{"owner": bad}
	job.TaskGroups[0].Tasks[0].Config["command"] = bad
	return n, job, []struct {
		t droverv1.MessageType
		m vtMessage
	}{
		{droverv1.MessageTypeNodeRegister, &droverv1.NodeRegisterEntry{Nodes: []*droverv1.Node{n.CloneVT()}}},
		{droverv1.MessageTypeJobRegister, &droverv1.JobRegisterEntry{Job: job.CloneVT(), Eval: mock.Eval(job, droverv1.EvalTrigger_EVAL_TRIGGER_JOB_REGISTER)}},
	}
}

// syncBuffer is a log destination for a test.
type syncBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

func loggedHarness(t *testing.T) (*harness, *syncBuffer) {
	h := newHarness(t)
	var log syncBuffer
	h.fsm.logger = slog.New(slog.NewTextHandler(&log, nil))
	return h, &log
}

// TestApplyRepairsOldEntries applies the same old entries on two FSMs, as
// two servers would: both store the same repaired strings, so the state
// digest works and agrees, and each logs a warning naming the entry.
func TestApplyRepairsOldEntries(t *testing.T) {
	node, job, entries := oldEntries()
	var digests []map[string]string
	for range 2 {
		h, log := loggedHarness(t)
		for _, e := range entries {
			h.mustApply(e.t, e.m)
		}
		snap := h.fsm.State().Snapshot()
		digests = append(digests, mustDigest(t, snap))
		got := snap.NodeByID(node.GetId())
		if got.GetName() != repaired || got.GetAttributes()[repaired] != "x" || got.GetAttributes()["rack"] != repaired {
			t.Errorf("stored node %q %v, want its strings repaired", got.GetName(), got.GetAttributes())
		}
		gotJob := snap.JobByID(job.GetId())
		if gotJob.GetMeta()["owner"] != repaired || gotJob.GetTaskGroups()[0].GetTasks()[0].GetConfig()["command"] != repaired {
			t.Errorf("stored job meta %v, config %v, want repaired", gotJob.GetMeta(), gotJob.GetTaskGroups()[0].GetTasks()[0].GetConfig())
		}
		for i := range entries {
			if want := "index=" + strconv.Itoa(i+1); !strings.Contains(log.String(), want) {
				t.Errorf("no warning names %s:\n%s", want, log)
			}
		}
		if n := strings.Count(log.String(), "level=WARN"); n != len(entries) {
			t.Errorf("%d warnings, want one per entry:\n%s", n, log)
		}
	}
	if !maps.Equal(digests[0], digests[1]) {
		t.Errorf("two FSMs applying the same entries differ:\n%v\n%v", digests[0], digests[1])
	}
}

// TestApplyLeavesPortableEntriesAlone: valid entries are applied as they
// are, without a warning.
func TestApplyLeavesPortableEntriesAlone(t *testing.T) {
	h, log := loggedHarness(t)
	n := mock.Node()
	n.Name = "nœud-日本"
	h.mustApply(droverv1.MessageTypeNodeRegister, &droverv1.NodeRegisterEntry{Nodes: []*droverv1.Node{n.CloneVT()}})
	if got := h.fsm.State().Snapshot().NodeByID(n.GetId()); got.GetName() != n.GetName() {
		t.Errorf("stored name %q, want %q", got.GetName(), n.GetName())
	}
	if strings.Contains(log.String(), "level=WARN") {
		t.Errorf("warning for a valid entry:\n%s", log)
	}
}

// TestRestoreRepairsOldSnapshot restores a snapshot an older server wrote
// from a state holding invalid strings: the restored state holds them
// repaired, the same on every server, with one warning naming the index.
func TestRestoreRepairsOldSnapshot(t *testing.T) {
	node, job, entries := oldEntries()
	old, err := state.NewStateStore()
	if err != nil {
		t.Fatal(err)
	}
	// What an older FSM did: hand the entries to the state store as they
	// came.
	if _, _, err := old.UpsertNodes(1, entries[0].m.(*droverv1.NodeRegisterEntry)); err != nil {
		t.Fatal(err)
	}
	if _, _, err := old.UpsertJob(2, entries[1].m.(*droverv1.JobRegisterEntry)); err != nil {
		t.Fatal(err)
	}
	// Such a state cannot be digested; it must say so, not panic.
	if _, err := old.Snapshot().Digest(); err == nil || !strings.Contains(err.Error(), node.GetId()) {
		t.Errorf("digest of a state holding invalid UTF-8: %v, want an error naming node %s", err, node.GetId())
	}
	var snapshot bytes.Buffer
	if err := WriteSnapshot(&snapshot, old.Snapshot(), 2); err != nil {
		t.Fatal(err)
	}

	var digests []map[string]string
	for range 2 {
		h, log := loggedHarness(t)
		if err := h.fsm.Restore(io.NopCloser(bytes.NewReader(snapshot.Bytes()))); err != nil {
			t.Fatal(err)
		}
		snap := h.fsm.State().Snapshot()
		digests = append(digests, mustDigest(t, snap))
		if got := snap.NodeByID(node.GetId()); got.GetName() != repaired || got.GetAttributes()["rack"] != repaired {
			t.Errorf("restored node %q %v, want its strings repaired", got.GetName(), got.GetAttributes())
		}
		for _, j := range []*droverv1.Job{snap.JobByID(job.GetId()), snap.JobVersion(job.GetId(), 0)} {
			if j.GetMeta()["owner"] != repaired {
				t.Errorf("restored job meta %v, want repaired", j.GetMeta())
			}
		}
		if l := log.String(); !strings.Contains(l, "level=WARN") || !strings.Contains(l, "index=2") || !strings.Contains(l, "records=3") {
			t.Errorf("want one warning naming index 2 and 3 records (node, job, job version):\n%s", l)
		}
	}
	if !maps.Equal(digests[0], digests[1]) {
		t.Errorf("two FSMs restoring the same snapshot differ:\n%v\n%v", digests[0], digests[1])
	}
}
