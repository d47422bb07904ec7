package raftnode

import (
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"syscall"
	"time"
)

// ErrDataDirFull marks writes refused because the data dir's file system is
// full, or below the free-space reserve. Nothing of the refused write was
// stored; it may be retried once space is freed (or on another server).
var ErrDataDirFull = errors.New("data dir full")

// noSpaceHold is how long a write that failed for lack of space keeps later
// writes refused without trying, when there is no reserve to measure
// against: long enough not to hammer a full disk, short enough to notice
// freed space soon.
const noSpaceHold = 2 * time.Second

// SpaceError says that the data dir has no room for a write.
type SpaceError struct {
	// Dir is the data dir.
	Dir string
	// Free is the space left, in bytes, when it was measured.
	Free uint64
	// Reserve is the free-space reserve in bytes (0: none).
	Reserve uint64
	// Cause is the write error that showed the file system full, if the
	// write was tried (ENOSPC); nil when the guard refused it beforehand.
	Cause error
}

func (e *SpaceError) Error() string {
	if e.Cause != nil {
		return fmt.Sprintf("data dir %s is full (%s free): %v", e.Dir, formatBytes(e.Free), e.Cause)
	}
	return fmt.Sprintf("data dir %s is full: %s free, below the reserve of %s kept for raft's own records", e.Dir, formatBytes(e.Free), formatBytes(e.Reserve))
}

// Is makes errors.Is(err, ErrDataDirFull) true.
func (e *SpaceError) Is(target error) bool { return target == ErrDataDirFull }

// Unwrap returns the write error, if any.
func (e *SpaceError) Unwrap() error { return e.Cause }

// isNoSpace reports whether err says the file system is full (or the
// writer's quota used up). bbolt formats some of its errors with %s, so
// the text is checked as well as the chain.
func isNoSpace(err error) bool {
	if err == nil {
		return false
	}
	if errors.Is(err, syscall.ENOSPC) || errors.Is(err, syscall.EDQUOT) {
		return true
	}
	msg := err.Error()
	return strings.Contains(msg, syscall.ENOSPC.Error()) || strings.Contains(msg, syscall.EDQUOT.Error())
}

// spaceGuard refuses the writes that grow the data dir (log appends,
// snapshots) while its file system has less than reserve bytes free, so
// that what is left stays available to raft's term and vote records: raft
// panics when it cannot record a new term. It also remembers a write that
// failed with ENOSPC, so that callers see one clear error. It logs each
// change between full and not full once.
type spaceGuard struct {
	dir     string
	reserve uint64
	logger  *slog.Logger
	// free measures the bytes free to the server on dir's file system;
	// ok is false where that cannot be measured.
	free func(dir string) (bytes uint64, ok bool, err error)
	now  func() time.Time

	mu        sync.Mutex
	full      bool          // last check found the data dir full
	fullCh    chan struct{} // closed while full (see fullSignal)
	failedAt  time.Time     // last write that failed with ENOSPC
	failedErr error
}

func newSpaceGuard(dir string, reserve uint64, logger *slog.Logger) *spaceGuard {
	return &spaceGuard{dir: dir, reserve: reserve, logger: logger, free: freeSpace, now: time.Now, fullCh: make(chan struct{})}
}

// fullSignal returns a channel that is closed once a check or a failed
// write finds the data dir full. While it is not full, a later call may
// return a new channel.
func (g *spaceGuard) fullSignal() <-chan struct{} {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.fullCh
}

// check returns a *SpaceError when a write that grows the data dir should
// not be tried now, nil otherwise.
func (g *spaceGuard) check() error {
	free, measured, err := g.free(g.dir)
	if err != nil {
		// An unreadable file system is not a full one; the write itself
		// will say what is wrong.
		measured = false
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	var refusal error
	switch {
	case measured && g.reserve > 0 && free < g.reserve:
		refusal = &SpaceError{Dir: g.dir, Free: free, Reserve: g.reserve}
	case g.failedErr != nil && g.now().Sub(g.failedAt) < noSpaceHold:
		refusal = &SpaceError{Dir: g.dir, Free: free, Reserve: g.reserve, Cause: g.failedErr}
	}
	g.setFull(refusal)
	return refusal
}

// failed records the outcome of a write: a *SpaceError when it failed for
// lack of space, err unchanged otherwise.
func (g *spaceGuard) failed(err error) error {
	if !isNoSpace(err) {
		return err
	}
	free, _, _ := g.free(g.dir)
	g.mu.Lock()
	defer g.mu.Unlock()
	g.failedAt, g.failedErr = g.now(), err
	spaceErr := &SpaceError{Dir: g.dir, Free: free, Reserve: g.reserve, Cause: err}
	g.setFull(spaceErr)
	return spaceErr
}

// setFull logs a change between full and not full. g.mu is held.
func (g *spaceGuard) setFull(err error) {
	switch {
	case err != nil && !g.full:
		close(g.fullCh)
		g.logger.Error("data dir is full: refusing raft log appends and snapshots until space is freed", "err", err)
	case err == nil && g.full:
		g.fullCh = make(chan struct{})
		g.failedErr = nil
		g.logger.Info("data dir has space again: raft log appends and snapshots resume", "dir", g.dir)
	}
	g.full = err != nil
}

// formatBytes writes a byte count for people.
func formatBytes(n uint64) string {
	const unit = 1024
	if n < unit {
		return fmt.Sprintf("%d B", n)
	}
	div, exp := uint64(unit), 0
	for m := n / unit; m >= unit; m /= unit {
		div *= unit
		exp++
	}
	return fmt.Sprintf("%.1f %ciB", float64(n)/float64(div), "KMGTPE"[exp])
}
