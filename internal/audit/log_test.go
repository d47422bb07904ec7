package audit

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// readLines returns the lines of the log at path, failing the test unless
// every line is one complete JSON object.
func readLines(t *testing.T, path string) []map[string]any {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if len(data) == 0 {
		return nil
	}
	if data[len(data)-1] != '\n' {
		t.Fatalf("%s does not end with a newline: %q", path, tail(data))
	}
	var lines []map[string]any
	for i, line := range strings.Split(strings.TrimSuffix(string(data), "\n"), "\n") {
		var m map[string]any
		if err := json.Unmarshal([]byte(line), &m); err != nil {
			t.Fatalf("%s line %d is not a JSON object (%v): %q", path, i+1, err, line)
		}
		lines = append(lines, m)
	}
	return lines
}

func tail(b []byte) []byte { return b[max(0, len(b)-80):] }

func openLog(t *testing.T, path string, opts ...Option) *Log {
	t.Helper()
	l, err := Open(path, opts...)
	if err != nil {
		t.Fatal(err)
	}
	return l
}

func TestWriteLine(t *testing.T) {
	cet := time.FixedZone("CET", 3600)
	for _, tc := range []struct {
		name  string
		entry Entry
		want  map[string]any // "time" checked apart when absent
		raw   string         // the exact line, when given
	}{
		{
			name: "write",
			entry: Entry{
				Time:     time.Date(2026, 3, 4, 5, 6, 7, 123456789, cet),
				Accessor: "4f1c0d6e-accessor",
				Method:   "/drover.v1.JobService/Register",
				Peer:     "10.0.0.7:51234",
				IDs:      map[string]string{"job.id": "web", "request_id": "r-1"},
				Code:     "OK",
				Index:    42,
			},
			want: map[string]any{
				"time":     "2026-03-04T04:06:07.123456789Z",
				"accessor": "4f1c0d6e-accessor",
				"method":   "/drover.v1.JobService/Register",
				"peer":     "10.0.0.7:51234",
				"ids":      map[string]any{"job.id": "web", "request_id": "r-1"},
				"code":     "OK",
				"index":    float64(42),
			},
			raw: `{"time":"2026-03-04T04:06:07.123456789Z","accessor":"4f1c0d6e-accessor",` +
				`"method":"/drover.v1.JobService/Register","peer":"10.0.0.7:51234",` +
				`"ids":{"job.id":"web","request_id":"r-1"},"code":"OK","index":42}` + "\n",
		},
		{
			name: "denied, optional fields left out",
			entry: Entry{
				Time:     time.Date(2026, 3, 4, 5, 6, 7, 0, time.UTC),
				Accessor: "anonymous",
				Method:   "/drover.v1.NodeService/UpdateDrain",
				Code:     "PermissionDenied",
				Message:  "token lacks node:write on <all> & \"x\"\nsecond line",
			},
			want: map[string]any{
				"time":     "2026-03-04T05:06:07.000000000Z",
				"accessor": "anonymous",
				"method":   "/drover.v1.NodeService/UpdateDrain",
				"code":     "PermissionDenied",
				"message":  "token lacks node:write on <all> & \"x\"\nsecond line",
			},
			raw: `{"time":"2026-03-04T05:06:07.000000000Z","accessor":"anonymous",` +
				`"method":"/drover.v1.NodeService/UpdateDrain","code":"PermissionDenied",` +
				`"message":"token lacks node:write on <all> & \"x\"\nsecond line"}` + "\n",
		},
		{
			name:  "zero time is now",
			entry: Entry{Accessor: "server", Method: "/drover.v1.SchedulerService/SubmitPlan", Code: "OK"},
			want: map[string]any{
				"accessor": "server",
				"method":   "/drover.v1.SchedulerService/SubmitPlan",
				"code":     "OK",
			},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "audit.log")
			l := openLog(t, path)
			before := time.Now()
			if err := l.Write(tc.entry); err != nil {
				t.Fatal(err)
			}
			if err := l.Close(); err != nil {
				t.Fatal(err)
			}
			lines := readLines(t, path)
			if len(lines) != 1 {
				t.Fatalf("got %d lines, want 1", len(lines))
			}
			got := lines[0]
			if _, ok := tc.want["time"]; !ok {
				ts, _ := got["time"].(string)
				at, err := time.Parse(time.RFC3339Nano, ts)
				if err != nil || len(ts) != len("2006-01-02T15:04:05.000000000Z") || at.Before(before.Add(-time.Second)) || at.After(time.Now()) {
					t.Errorf("time = %q (%v), want now in UTC", ts, err)
				}
				delete(got, "time")
			}
			if tc.raw != "" {
				if data, _ := os.ReadFile(path); string(data) != tc.raw {
					t.Errorf("line\n got %s\nwant %s", data, tc.raw)
				}
			}
			gotJSON, _ := json.Marshal(got)
			wantJSON, _ := json.Marshal(tc.want)
			if string(gotJSON) != string(wantJSON) {
				t.Errorf("line\n got %s\nwant %s", gotJSON, wantJSON)
			}
			fi, err := os.Stat(path)
			if err != nil {
				t.Fatal(err)
			}
			if perm := fi.Mode().Perm(); perm != 0o600 {
				t.Errorf("mode %v, want 0600", perm)
			}
		})
	}
}

// writer writes n entries that say who wrote them, for counting.
func writer(l *Log, g, n int, errs chan<- error) {
	for i := range n {
		err := l.Write(Entry{
			Accessor: fmt.Sprintf("g%d", g),
			Method:   "/drover.v1.JobService/Register",
			IDs:      map[string]string{"job.id": fmt.Sprintf("job-%d-%d", g, i)},
			Code:     "OK",
			Index:    uint64(i + 1),
		})
		if err != nil {
			errs <- err
			return
		}
	}
}

// countUnique checks that the lines across files are exactly the writes of
// goroutines × perG writers, each once.
func countUnique(t *testing.T, goroutines, perG int, paths ...string) {
	t.Helper()
	seen := make(map[string]int)
	total := 0
	for _, p := range paths {
		for _, line := range readLines(t, p) {
			ids, _ := line["ids"].(map[string]any)
			key, _ := ids["job.id"].(string)
			seen[key]++
			total++
		}
	}
	if want := goroutines * perG; total != want || len(seen) != want {
		t.Fatalf("%d lines, %d distinct, want %d of each", total, len(seen), want)
	}
	for key, n := range seen {
		if n != 1 {
			t.Fatalf("%s written %d times", key, n)
		}
	}
}

func TestConcurrentWriters(t *testing.T) {
	for _, tc := range []struct {
		name          string
		opts          []Option
		goroutines, n int
	}{
		{"no sync", nil, 50, 200},
		{"sync", []Option{WithSync(true)}, 50, 200},
	} {
		t.Run(tc.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "audit.log")
			l := openLog(t, path, tc.opts...)
			errs := make(chan error, tc.goroutines)
			var wg sync.WaitGroup
			for g := range tc.goroutines {
				wg.Go(func() { writer(l, g, tc.n, errs) })
			}
			wg.Wait()
			close(errs)
			for err := range errs {
				t.Fatal(err)
			}
			if err := l.Close(); err != nil {
				t.Fatal(err)
			}
			countUnique(t, tc.goroutines, tc.n, path)
		})
	}
}

func TestReopenAfterRename(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "audit.log")
	l := openLog(t, path)
	defer l.Close()
	write := func(acc string) {
		t.Helper()
		if err := l.Write(Entry{Accessor: acc, Method: "/m", Code: "OK"}); err != nil {
			t.Fatal(err)
		}
	}
	write("a")
	write("b")
	if err := os.Rename(path, path+".1"); err != nil {
		t.Fatal(err)
	}
	write("c") // still goes to the renamed file, as logrotate expects
	if err := l.Reopen(); err != nil {
		t.Fatal(err)
	}
	write("d")
	write("e")

	for _, tc := range []struct {
		path string
		want []string
	}{
		{path + ".1", []string{"a", "b", "c"}},
		{path, []string{"d", "e"}},
	} {
		var got []string
		for _, line := range readLines(t, tc.path) {
			got = append(got, line["accessor"].(string))
		}
		if strings.Join(got, ",") != strings.Join(tc.want, ",") {
			t.Errorf("%s holds %v, want %v", filepath.Base(tc.path), got, tc.want)
		}
	}
}

func TestReopenUnderLoad(t *testing.T) {
	const goroutines, n, rotations = 20, 300, 5
	dir := t.TempDir()
	path := filepath.Join(dir, "audit.log")
	l := openLog(t, path)

	var written atomic.Int64
	errs := make(chan error, goroutines)
	var wg sync.WaitGroup
	for g := range goroutines {
		wg.Go(func() {
			for i := range n {
				err := l.Write(Entry{
					Accessor: fmt.Sprintf("g%d", g),
					Method:   "/m",
					IDs:      map[string]string{"job.id": fmt.Sprintf("job-%d-%d", g, i)},
					Code:     "OK",
				})
				if err != nil {
					errs <- err
					return
				}
				written.Add(1)
			}
		})
	}
	paths := []string{path}
	for r := 1; r <= rotations; r++ {
		// Rotate at evenly spaced points of the run, while writers write.
		for written.Load() < int64(r*goroutines*n/(rotations+1)) {
			time.Sleep(100 * time.Microsecond)
		}
		rotated := fmt.Sprintf("%s.%d", path, r)
		if err := os.Rename(path, rotated); err != nil {
			t.Fatal(err)
		}
		if err := l.Reopen(); err != nil {
			t.Fatal(err)
		}
		paths = append(paths, rotated)
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	countUnique(t, goroutines, n, paths...)
}

func TestReopenFailureKeepsWriting(t *testing.T) {
	dir := t.TempDir()
	sub := filepath.Join(dir, "logs")
	if err := os.Mkdir(sub, 0o700); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(sub, "audit.log")
	l := openLog(t, path)
	defer l.Close()
	// The directory goes away: the log cannot be opened again.
	if err := os.Rename(sub, filepath.Join(dir, "moved")); err != nil {
		t.Fatal(err)
	}
	if err := l.Reopen(); err == nil || !strings.Contains(err.Error(), path) {
		t.Fatalf("Reopen = %v, want an error naming %s", err, path)
	}
	if err := l.Write(Entry{Accessor: "a", Method: "/m", Code: "OK"}); err != nil {
		t.Fatalf("Write after a failed Reopen: %v", err)
	}
	if lines := readLines(t, filepath.Join(dir, "moved", "audit.log")); len(lines) != 1 {
		t.Fatalf("old file holds %d lines, want 1", len(lines))
	}
}

func TestClosed(t *testing.T) {
	path := filepath.Join(t.TempDir(), "audit.log")
	l := openLog(t, path)
	if err := l.Write(Entry{Accessor: "a", Method: "/m", Code: "OK"}); err != nil {
		t.Fatal(err)
	}
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name string
		call func() error
	}{
		{"Write", func() error { return l.Write(Entry{Accessor: "b", Method: "/m", Code: "OK"}) }},
		{"Reopen", l.Reopen},
		{"Close", l.Close},
	} {
		err := tc.call()
		if !errors.Is(err, os.ErrClosed) || !strings.Contains(err.Error(), path) {
			t.Errorf("%s after Close = %v, want os.ErrClosed naming %s", tc.name, err, path)
		}
	}
	if lines := readLines(t, path); len(lines) != 1 {
		t.Errorf("%d lines, want 1", len(lines))
	}
}

// TestCloseDuringWrites checks that Close writes what is queued: every Write
// that returned nil has its line in the file, and no other line is there.
func TestCloseDuringWrites(t *testing.T) {
	path := filepath.Join(t.TempDir(), "audit.log")
	l := openLog(t, path)
	var ok, refused atomic.Int64
	var wg sync.WaitGroup
	start := make(chan struct{})
	for g := range 20 {
		wg.Go(func() {
			<-start
			for i := 0; ; i++ {
				err := l.Write(Entry{Accessor: fmt.Sprintf("g%d", g), Method: "/m", Code: "OK"})
				if errors.Is(err, os.ErrClosed) {
					refused.Add(1)
					return
				}
				if err != nil {
					t.Error(err)
					return
				}
				ok.Add(1)
			}
		})
	}
	close(start)
	for ok.Load() < 500 {
		time.Sleep(100 * time.Microsecond)
	}
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	wg.Wait()
	if got := len(readLines(t, path)); int64(got) != ok.Load() || refused.Load() != 20 {
		t.Fatalf("%d lines for %d successful writes (%d writers refused, want 20)", got, ok.Load(), refused.Load())
	}
}

func TestOpenErrors(t *testing.T) {
	dir := t.TempDir()
	for _, tc := range []struct {
		name string
		path string
		is   error
	}{
		{"missing directory", filepath.Join(dir, "no", "such", "dir", "audit.log"), fs.ErrNotExist},
		{"a directory", dir, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			l, err := Open(tc.path)
			if err == nil {
				l.Close()
				t.Fatal("Open succeeded")
			}
			if !strings.Contains(err.Error(), tc.path) {
				t.Errorf("error %q does not name %s", err, tc.path)
			}
			if tc.is != nil && !errors.Is(err, tc.is) {
				t.Errorf("error %v is not %v", err, tc.is)
			}
		})
	}
}
