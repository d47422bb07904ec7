package audit

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sync"
)

// Option configures a Log.
type Option func(*options)

type options struct {
	sync bool
}

// WithSync makes the log fsync every group of lines before their Write calls
// return, so that an acknowledged call's line survives a power loss, not only
// a crash of the process.
//
// The cost is one fsync per group. A lone caller waits for a whole fsync on
// every Write (from tens of microseconds on a disk with a battery-backed cache
// to several milliseconds on one without), and throughput is about the number
// of concurrent callers times the fsyncs the disk can do per second, since
// each group waits for the one before it. See BenchmarkWrite for figures.
func WithSync(on bool) Option {
	return func(o *options) { o.sync = on }
}

// Log writes entries to a file, one JSON object per line. Its methods are
// safe for concurrent use.
type Log struct {
	path string
	sync bool

	// mu guards the queue of lines not yet written and which caller writes
	// them. It is never held across a syscall.
	mu sync.Mutex
	// idle is signalled when leading turns false, for Close.
	idle   sync.Cond
	closed bool
	// leading is true while some Write call (the leader) is writing a group.
	// Callers arriving meanwhile add their line to pending and wait.
	leading bool
	// pending holds the lines that the next write will carry; nil when none
	// wait. Invariant: pending is nil whenever leading is false.
	pending *group

	// fileMu guards f and torn, and is held across each group's write so
	// that Reopen and Close never swap or close the file under a write. Only
	// the leader writes, so it takes fileMu uncontended except against them.
	fileMu sync.Mutex
	f      *os.File
	// torn is true when a failed write left part of a line at the end of the
	// file that could not be cut off again; the next write starts with a
	// newline, so the fragment is a (broken) line of its own and the lines
	// after it stay whole.
	torn bool
}

// group is a batch of lines written by one write(2).
type group struct {
	buf []byte
	// lead hands the group to one of its waiters when the previous leader
	// is done, so that the new leader is a caller that needs this group
	// written anyway. Buffered: the sender must not block holding mu.
	lead chan struct{}
	// done is closed once buf has been written or has failed; err is set
	// before.
	done chan struct{}
	err  error
}

// Open opens the file at path for appending, creating it with mode 0600 if it
// does not exist (the log names who did what: it is not for every local
// user).
func Open(path string, opts ...Option) (*Log, error) {
	var o options
	for _, opt := range opts {
		opt(&o)
	}
	f, err := openFile(path, o.sync)
	if err != nil {
		return nil, err
	}
	l := &Log{path: path, sync: o.sync, f: f}
	l.idle.L = &l.mu
	return l, nil
}

// openFile opens path with O_APPEND, so that every write lands at the end of
// the file whatever else has written to it. With sync it also fsyncs the
// directory: a file created since the last fsync of its directory may be
// gone after a power loss, lines and all.
func openFile(path string, sync bool) (*os.File, error) {
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o600)
	if err != nil {
		return nil, pathError("open", path, err)
	}
	if sync {
		if err := syncDir(filepath.Dir(path)); err != nil {
			f.Close()
			return nil, err
		}
	}
	return f, nil
}

func syncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return pathError("open", dir, err)
	}
	defer d.Close()
	if err := d.Sync(); err != nil {
		return pathError("fsync", dir, err)
	}
	return nil
}

// Write appends e as one line and returns once the line has been written to
// the file (write(2) returned; with WithSync, fsync too). Lines of concurrent
// calls never interleave. A failed write returns an error naming the path
// and wrapping the cause (errors.Is(err, syscall.ENOSPC) on a full disk);
// none of the failed group's lines is then left in the file if the partial
// write could be cut off again. After Close, Write returns an error wrapping
// os.ErrClosed.
func (l *Log) Write(e Entry) error {
	enc, err := encode(e)
	if err != nil {
		return fmt.Errorf("audit: encode entry for %s: %w", l.path, err)
	}
	l.mu.Lock()
	if l.closed {
		l.mu.Unlock()
		enc.release()
		return pathError("write", l.path, os.ErrClosed)
	}
	g := l.pending
	if g == nil {
		g = newGroup()
		l.pending = g
	}
	g.buf = append(g.buf, enc.line()...)
	enc.release()
	if l.leading {
		// Someone is writing: our line goes with the next group, which
		// one of its callers (perhaps this one) writes when handed the lead.
		l.mu.Unlock()
		select {
		case <-g.done:
			return g.err
		case <-g.lead:
		}
		l.mu.Lock()
	}
	// Lead: take the whole queue, our line and all added since.
	l.leading = true
	l.pending = nil
	l.mu.Unlock()

	g.err = l.writeGroup(g.buf)
	putBuf(g.buf)
	g.buf = nil

	l.mu.Lock()
	if next := l.pending; next != nil {
		// Lines queued while we wrote: one of their callers writes them next,
		// rather than us, so no caller waits for more than two groups.
		next.lead <- struct{}{}
	} else {
		l.leading = false
		l.idle.Broadcast()
	}
	l.mu.Unlock()
	close(g.done)
	return g.err
}

// writeGroup writes buf, the lines of one group, in one write(2).
func (l *Log) writeGroup(buf []byte) error {
	l.fileMu.Lock()
	defer l.fileMu.Unlock()
	if l.f == nil {
		// Close waits for every leader, so this is a bug, not a race.
		return pathError("write", l.path, os.ErrClosed)
	}
	if l.torn {
		if _, err := l.f.Write([]byte{'\n'}); err != nil {
			return pathError("write", l.path, err)
		}
		l.torn = false
	}
	n, err := l.f.Write(buf)
	if err != nil {
		l.cutTorn(n)
		return pathError("write", l.path, err)
	}
	if l.sync {
		if err := l.f.Sync(); err != nil {
			return pathError("fsync", l.path, err)
		}
	}
	return nil
}

// cutTorn removes the n bytes a failed write left at the end of the file (on
// a full disk, write(2) may take the first part of a group), so the file
// ends with a whole line and the group counts as not written. If that fails
// the next write starts a new line instead.
func (l *Log) cutTorn(n int) {
	if n == 0 {
		return
	}
	fi, err := l.f.Stat()
	if err == nil {
		err = l.f.Truncate(fi.Size() - int64(n))
	}
	if err != nil {
		l.torn = true
	}
}

// Reopen closes the file and opens path again, for logrotate's
// rename-then-signal rotation. Lines written concurrently go either to the
// old file or to the new one, never lost. If path cannot be opened, Reopen
// returns the error and the log goes on writing to the file it had.
func (l *Log) Reopen() error {
	f, err := openFile(l.path, l.sync)
	if err != nil {
		return err
	}
	l.fileMu.Lock()
	old := l.f
	if old == nil {
		l.fileMu.Unlock()
		f.Close()
		return pathError("reopen", l.path, os.ErrClosed)
	}
	l.f = f
	l.torn = false // the new file starts clean
	l.fileMu.Unlock()
	// No write can be using old: they all hold fileMu.
	if err := old.Close(); err != nil {
		return pathError("close", l.path, err)
	}
	return nil
}

// Close writes the lines already queued, then closes the file. Write after
// Close returns an error, and so does a second Close.
func (l *Log) Close() error {
	l.mu.Lock()
	if l.closed {
		l.mu.Unlock()
		return pathError("close", l.path, os.ErrClosed)
	}
	l.closed = true
	// Callers already queued are waiting for their lines: let the leaders
	// finish. No new line can join now.
	for l.leading {
		l.idle.Wait()
	}
	l.mu.Unlock()

	l.fileMu.Lock()
	defer l.fileMu.Unlock()
	err := l.f.Close()
	l.f = nil
	if err != nil {
		return pathError("close", l.path, err)
	}
	return nil
}

// pathError says what failed on which file. It unwraps the *fs.PathError of
// package os so the path appears once, and keeps the cause for errors.Is.
func pathError(op, path string, err error) error {
	var pe *fs.PathError
	if errors.As(err, &pe) {
		err = pe.Err
	}
	return fmt.Errorf("audit: %s %s: %w", op, path, err)
}

func newGroup() *group {
	return &group{
		buf:  getBuf(),
		lead: make(chan struct{}, 1),
		done: make(chan struct{}),
	}
}

// bufs recycles group buffers: a group's lines are dead once written.
var bufs = sync.Pool{New: func() any { b := make([]byte, 0, 4096); return &b }}

func getBuf() []byte { return (*bufs.Get().(*[]byte))[:0] }

func putBuf(b []byte) {
	if cap(b) <= maxPooled {
		bufs.Put(&b)
	}
}
