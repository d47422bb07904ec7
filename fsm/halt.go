package fsm

import (
	"errors"
	"fmt"
	"sync"
	"sync/atomic"

	droverv1 "github.com/droverhq/drover/proto/drover/v1"
)

// Release is what the FSM knows of the release its binary was built as.
type Release struct {
	// Version is the release, semantic versioning without a leading "v";
	// it appears in the reason of a halt.
	Version string
	// Knows reports whether the release knows an entry type. A binary
	// built with an older version string knows only that release's types,
	// even though its source could decode newer ones: it behaves as the
	// older release would. Nil knows every type Decode decodes.
	Knows func(droverv1.MessageType) bool
}

// SetRelease tells the FSM which release it runs as. Call it before raft
// starts applying entries.
func (f *FSM) SetRelease(r Release) { f.release = r }

// knows reports whether this release knows entry type t.
func (f *FSM) knows(t droverv1.MessageType) bool {
	return f.release.Knows == nil || f.release.Knows(t)
}

// decode is Decode, except that a type this release does not know is
// unknown even when Decode could decode it.
func (f *FSM) decode(data []byte) (droverv1.MessageType, any, error) {
	if len(data) > 0 && !f.knows(droverv1.MessageType(data[0])) {
		t := droverv1.MessageType(data[0])
		return t, nil, unknownType(t)
	}
	return Decode(data)
}

// Halt says why the FSM stopped applying the raft log: the entry at Index
// could not be applied by this server's release, and skipping it would let
// this server's state diverge from the others'. A server that halted must
// be upgraded (an unknown type) or its data dir inspected (an entry that
// does not decode); restarting the same binary halts at the same entry.
type Halt struct {
	// Index and Type are those of the entry that could not be applied.
	Index uint64
	Type  droverv1.MessageType
	// Version is this server's release.
	Version string
	// Err says what was wrong with the entry.
	Err error
}

// Error describes the halt with what to do about it.
func (h *Halt) Error() string {
	if errors.Is(h.Err, ErrUnknownType) {
		return fmt.Sprintf("stopped applying the raft log at index %d: entry type %s is unknown to this server's release %s "+
			"and cannot be skipped; upgrade this server to the release of the servers that wrote it", h.Index, h.Type, h.Version)
	}
	return fmt.Sprintf("stopped applying the raft log at index %d: the %s entry cannot be applied by this server's release %s (%v); "+
		"applying anything after it would let this server's state diverge", h.Index, h.Type, h.Version, h.Err)
}

// Unwrap returns what was wrong with the entry.
func (h *Halt) Unwrap() error { return h.Err }

// halt records the FSM's halt, once.
type halt struct {
	reason atomic.Pointer[Halt]
	once   sync.Once
	done   chan struct{}
}

func newHalt() halt { return halt{done: make(chan struct{})} }

// Halted returns why the FSM stopped applying the log, or nil while it
// applies.
func (f *FSM) Halted() *Halt { return f.halt.reason.Load() }

// HaltCh returns a channel closed when the FSM halts.
func (f *FSM) HaltCh() <-chan struct{} { return f.halt.done }

// stop halts the FSM at the entry at index: nothing is applied from here
// on. The entry and every later one are answered with the *Halt, which is
// also what raft's proposer of the entry receives.
func (f *FSM) stop(index uint64, t droverv1.MessageType, err error) any {
	h := &Halt{Index: index, Type: t, Version: f.release.Version, Err: err}
	f.halt.once.Do(func() {
		f.halt.reason.Store(h)
		close(f.halt.done)
		f.logger.Error("stopped applying the raft log", "index", index, "type", t.String(), "version", f.release.Version, "reason", h.Error())
	})
	return f.Halted()
}
