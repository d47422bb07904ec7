package fsm

import (
	"bufio"
	"log/slog"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/hashicorp/raft"

	"github.com/droverhq/drover/fsm/events"
	"github.com/droverhq/drover/fsm/state"
	"github.com/droverhq/drover/internal/backup"
	"github.com/droverhq/drover/internal/mock"
	droverv1 "github.com/droverhq/drover/proto/drover/v1"
)

// BenchmarkBackup100k saves a state of 100,000 allocations on 5,000 nodes
// as `drover operator snapshot save` does on the server (the state to a
// file, then the archive), and restores it as `restore` does on the
// leader (archive read and checked, the state checked by a dry run,
// re-indexed, restored). Run with -benchtime 1x -count 3.
func BenchmarkBackup100k(b *testing.B) {
	const (
		nodes  = 5000
		jobs   = 100
		allocs = 100_000
	)
	f := benchFSM(b)
	var index uint64
	apply := func(t droverv1.MessageType, m vtMessage) {
		index++
		data, err := Encode(t, m)
		if err != nil {
			b.Fatal(err)
		}
		if err, ok := f.Apply(&raft.Log{Index: index, Data: data}).(error); ok {
			b.Fatal(err)
		}
	}
	ns := make([]*droverv1.Node, nodes)
	for i := range ns {
		ns[i] = mock.Node()
	}
	for i := 0; i < nodes; i += 500 {
		apply(droverv1.MessageTypeNodeRegister, &droverv1.NodeRegisterEntry{Nodes: ns[i : i+500], RegisteredAt: 1})
	}
	js := make([]*droverv1.Job, jobs)
	for i := range js {
		js[i] = mock.Job(allocs / jobs)
		apply(droverv1.MessageTypeJobRegister, &droverv1.JobRegisterEntry{Job: js[i], Eval: mock.Eval(js[i], droverv1.EvalTrigger_EVAL_TRIGGER_JOB_REGISTER)})
		js[i] = f.State().Snapshot().JobByID(js[i].GetId())
	}
	for start := 0; start < allocs; start += 1000 {
		e := &droverv1.PlanResultEntry{AppliedAt: 1}
		for i := start; i < start+1000; i++ {
			e.Allocations = append(e.Allocations, mock.Alloc(ns[i%nodes], js[i%jobs], i))
		}
		apply(droverv1.MessageTypePlanResult, e)
	}
	dir := b.TempDir()
	statePath, archivePath := filepath.Join(dir, "state.bin"), filepath.Join(dir, "backup.snap")
	for b.Loop() {
		start := time.Now()
		size := writeFile(b, statePath, func(w *bufio.Writer) error { return WriteSnapshot(w, f.State().Snapshot(), index) })
		archived := writeFile(b, archivePath, func(w *bufio.Writer) error {
			in, err := os.Open(statePath)
			if err != nil {
				return err
			}
			defer in.Close()
			return backup.Write(w, backup.Meta{Index: index, Time: time.Now(), StateSize: size}, bufio.NewReader(in))
		})
		saved := time.Since(start)

		start = time.Now()
		restored := benchFSM(b)
		writeFile(b, statePath, func(w *bufio.Writer) error {
			in, err := os.Open(archivePath)
			if err != nil {
				return err
			}
			defer in.Close()
			_, err = backup.Read(bufio.NewReader(in), w)
			return err
		})
		readFile(b, statePath, func(r *bufio.Reader) error { return restored.CheckSnapshot(r) })
		reindexed := filepath.Join(dir, "reindexed.bin")
		writeFile(b, reindexed, func(w *bufio.Writer) error {
			in, err := os.Open(statePath)
			if err != nil {
				return err
			}
			defer in.Close()
			return ReindexSnapshot(in, w, index+1<<16)
		})
		in, err := os.Open(reindexed)
		if err != nil {
			b.Fatal(err)
		}
		if err := restored.Restore(in); err != nil {
			b.Fatal(err)
		}
		b.ReportMetric(float64(saved.Milliseconds()), "save-ms")
		b.ReportMetric(float64(time.Since(start).Milliseconds()), "restore-ms")
		b.ReportMetric(float64(archived)/(1<<20), "archive-MiB")
		b.ReportMetric(float64(size)/(1<<20), "state-MiB")
	}
}

func benchFSM(b *testing.B) *FSM {
	st, err := state.NewStateStore()
	if err != nil {
		b.Fatal(err)
	}
	broker := events.NewBroker(events.Config{})
	b.Cleanup(broker.Close)
	return New(st, broker, slog.New(slog.DiscardHandler))
}

// writeFile writes path through write and returns its size.
func writeFile(b *testing.B, path string, write func(*bufio.Writer) error) int64 {
	out, err := os.Create(path)
	if err != nil {
		b.Fatal(err)
	}
	defer out.Close()
	w := bufio.NewWriterSize(out, 1<<20)
	if err := write(w); err != nil {
		b.Fatal(err)
	}
	if err := w.Flush(); err != nil {
		b.Fatal(err)
	}
	st, err := out.Stat()
	if err != nil {
		b.Fatal(err)
	}
	return st.Size()
}

func readFile(b *testing.B, path string, read func(*bufio.Reader) error) {
	in, err := os.Open(path)
	if err != nil {
		b.Fatal(err)
	}
	defer in.Close()
	if err := read(bufio.NewReaderSize(in, 1<<20)); err != nil {
		b.Fatal(err)
	}
}
