package raftnode

import (
	"context"
	"fmt"
	"log/slog"
	"maps"
	"path/filepath"
	"runtime"
	"slices"
	"sync"
	"testing"

	"github.com/hashicorp/go-hclog"
)

type record struct {
	level slog.Level
	msg   string
	attrs map[string]string
	file  string // base name of the source file of the log call
}

// recordingHandler stores every record, with attributes flattened to strings.
type recordingHandler struct {
	level slog.Level
	mu    *sync.Mutex
	recs  *[]record
	attrs []slog.Attr
}

func newRecorder(level slog.Level) (*slog.Logger, func() []record) {
	h := &recordingHandler{level: level, mu: new(sync.Mutex), recs: new([]record)}
	return slog.New(h), func() []record {
		h.mu.Lock()
		defer h.mu.Unlock()
		return slices.Clone(*h.recs)
	}
}

func (h *recordingHandler) Enabled(_ context.Context, l slog.Level) bool { return l >= h.level }

func (h *recordingHandler) Handle(_ context.Context, r slog.Record) error {
	rec := record{level: r.Level, msg: r.Message, attrs: map[string]string{}}
	add := func(a slog.Attr) {
		if _, dup := rec.attrs[a.Key]; dup {
			rec.attrs[a.Key] += "|DUPLICATE"
			return
		}
		rec.attrs[a.Key] = a.Value.String()
	}
	for _, a := range h.attrs {
		add(a)
	}
	r.Attrs(func(a slog.Attr) bool { add(a); return true })
	if r.PC != 0 {
		f, _ := runtime.CallersFrames([]uintptr{r.PC}).Next()
		rec.file = filepath.Base(f.File)
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	*h.recs = append(*h.recs, rec)
	return nil
}

func (h *recordingHandler) WithAttrs(as []slog.Attr) slog.Handler {
	c := *h
	c.attrs = append(slices.Clone(h.attrs), as...)
	return &c
}

func (h *recordingHandler) WithGroup(string) slog.Handler { return h } // unused by the adapter

func TestHCLoggerNamedWithAndArgs(t *testing.T) {
	sl, records := newRecorder(LevelTrace)
	base := NewHCLogger(sl, "raft")
	snap := base.Named("snapshot").With("id", "snap-1")
	snap.Info("restored", "index", 42, "servers", hclog.Fmt("%d servers", 3))
	base.Named("net").Named("pool").Warn("dangling", "lonely")
	snap.ResetNamed("other").Error("reset", "code", hclog.Hex(255))

	if got := snap.Name(); got != "raft.snapshot" {
		t.Errorf("Name() = %q", got)
	}
	if got := snap.ImpliedArgs(); !slices.Equal(got, []any{"id", "snap-1"}) {
		t.Errorf("ImpliedArgs() = %v", got)
	}
	want := []record{
		{slog.LevelInfo, "restored", map[string]string{"component": "raft.snapshot", "id": "snap-1", "index": "42", "servers": "3 servers"}, "hclog_test.go"},
		{slog.LevelWarn, "dangling", map[string]string{"component": "raft.net.pool", hclog.MissingKey: "lonely"}, "hclog_test.go"},
		{slog.LevelError, "reset", map[string]string{"component": "other", "id": "snap-1", "code": "0xff"}, "hclog_test.go"},
	}
	assertRecords(t, records(), want)
}

func TestHCLoggerLevels(t *testing.T) {
	sl, records := newRecorder(LevelTrace)
	l := NewHCLogger(sl, "")
	l.Trace("t")
	l.Debug("d")
	l.Info("i")
	l.Warn("w")
	l.Error("e")
	l.Log(hclog.Warn, "log-w")
	l.Log(hclog.Off, "never")
	var got []string
	for _, r := range records() {
		got = append(got, fmt.Sprintf("%s:%s", r.level, r.msg))
		if _, ok := r.attrs["component"]; ok {
			t.Errorf("unnamed logger added a component attribute: %v", r.attrs)
		}
	}
	want := []string{"DEBUG-4:t", "DEBUG:d", "INFO:i", "WARN:w", "ERROR:e", "WARN:log-w"}
	if !slices.Equal(got, want) {
		t.Fatalf("records = %q, want %q", got, want)
	}
}

func TestHCLoggerLevelFiltering(t *testing.T) {
	sl, records := newRecorder(slog.LevelInfo)
	parent := NewHCLogger(sl, "raft")
	child := parent.Named("snapshot")

	if parent.IsTrace() || parent.IsDebug() || !parent.IsInfo() || !parent.IsWarn() || !parent.IsError() {
		t.Fatal("Is* do not follow the slog handler's level")
	}
	if got := parent.GetLevel(); got != hclog.Info {
		t.Fatalf("GetLevel() = %s, want info from the handler", got)
	}
	child.Debug("hidden by handler")

	child.SetLevel(hclog.Warn) // shared with related loggers, as hclog specifies
	if parent.IsInfo() || parent.GetLevel() != hclog.Warn {
		t.Fatalf("SetLevel on a child did not reach the parent: IsInfo %v GetLevel %s", parent.IsInfo(), parent.GetLevel())
	}
	parent.Info("hidden by floor")
	parent.Warn("shown")

	parent.SetLevel(hclog.Trace) // a floor below the handler cannot enable more
	if parent.IsDebug() {
		t.Fatal("IsDebug true although the handler is at Info")
	}
	parent.SetLevel(hclog.NoLevel)
	child.Info("shown again")

	var got []string
	for _, r := range records() {
		got = append(got, r.msg)
	}
	if want := []string{"shown", "shown again"}; !slices.Equal(got, want) {
		t.Fatalf("records = %q, want %q", got, want)
	}
}

func TestHCLoggerStandardLogger(t *testing.T) {
	sl, records := newRecorder(LevelTrace)
	l := NewHCLogger(sl, "raft")
	l.StandardLogger(nil).Print("plain line")
	l.StandardLogger(&hclog.StandardLoggerOptions{InferLevels: true}).Print("[WARN] careful")
	l.StandardLogger(&hclog.StandardLoggerOptions{InferLevels: true}).Print("no prefix")
	l.StandardLogger(&hclog.StandardLoggerOptions{ForceLevel: hclog.Error}).Print("[DEBUG] forced")
	if _, err := fmt.Fprintln(l.StandardWriter(&hclog.StandardLoggerOptions{ForceLevel: hclog.Debug}), "via writer"); err != nil {
		t.Fatal(err)
	}

	c := map[string]string{"component": "raft"}
	assertRecords(t, records(), []record{
		{slog.LevelInfo, "plain line", c, ""},
		{slog.LevelWarn, "careful", c, ""},
		{slog.LevelInfo, "no prefix", c, ""},
		{slog.LevelError, "forced", c, ""},
		{slog.LevelDebug, "via writer", c, ""},
	})
}

// assertRecords compares records; an empty want.file skips the source check.
func assertRecords(t *testing.T, got, want []record) {
	t.Helper()
	if len(got) != len(want) {
		t.Fatalf("got %d records %+v, want %d", len(got), got, len(want))
	}
	for i := range want {
		g, w := got[i], want[i]
		if g.level != w.level || g.msg != w.msg || !maps.Equal(g.attrs, w.attrs) || (w.file != "" && g.file != w.file) {
			t.Errorf("record %d = %+v, want %+v", i, g, w)
		}
	}
}
