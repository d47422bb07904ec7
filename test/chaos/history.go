package chaos

import (
	"encoding/json"
	"fmt"
	"os"
	"sort"
	"sync"
	"time"

	"github.com/anishathalye/porcupine"
)

// Kind is what an operation did to its register.
type Kind string

// Operation kinds.
const (
	Write Kind = "write"
	Read  Kind = "read"
)

// Outcome is what the client learned about an operation.
type Outcome string

// Outcomes.
const (
	// OK: acknowledged (a write) or answered (a read).
	OK Outcome = "ok"
	// Unknown: a write whose answer was lost (timeout, unavailable after
	// the leader changed): it may or may not have taken effect, at any
	// moment after its call. Reads that fail are not recorded at all.
	Unknown Outcome = "unknown"
)

// Op is one operation of the history: a client's write or read of one
// register (a job's or a node's chaos value).
type Op struct {
	Client  int     `json:"client"`
	Key     string  `json:"key"`
	Kind    Kind    `json:"kind"`
	Value   string  `json:"value,omitempty"` // written, or read ("" = absent)
	Outcome Outcome `json:"outcome"`
	// Server is the server the call (or its last attempt) went to.
	Server string `json:"server"`
	// Call and Return are nanoseconds since the history began.
	Call   int64 `json:"call"`
	Return int64 `json:"return"`
	// Note says why an unknown write is unknown, or how a read was made.
	Note string `json:"note,omitempty"`
}

// History records operations from concurrent clients.
type History struct {
	start time.Time

	mu  sync.Mutex
	ops []Op
}

// NewHistory starts a history now.
func NewHistory() *History { return &History{start: time.Now()} }

// Now is the history's clock: monotonic nanoseconds since it began.
func (h *History) Now() int64 { return int64(time.Since(h.start)) }

// Add records an operation.
func (h *History) Add(op Op) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.ops = append(h.ops, op)
}

// Ops returns the operations recorded so far, by call time.
func (h *History) Ops() []Op {
	h.mu.Lock()
	defer h.mu.Unlock()
	ops := append([]Op(nil), h.ops...)
	sort.SliceStable(ops, func(i, j int) bool { return ops[i].Call < ops[j].Call })
	return ops
}

// Summary counts the operations by kind and outcome.
type Summary struct {
	Writes, AckedWrites, UnknownWrites, Reads int
}

// Summarize counts ops.
func Summarize(ops []Op) Summary {
	var s Summary
	for _, op := range ops {
		switch {
		case op.Kind == Read:
			s.Reads++
		case op.Outcome == OK:
			s.Writes++
			s.AckedWrites++
		default:
			s.Writes++
			s.UnknownWrites++
		}
	}
	return s
}

// WriteJSON writes ops to path, one JSON document.
func WriteJSON(path string, ops []Op) error {
	data, err := json.MarshalIndent(ops, "", " ")
	if err != nil {
		return err
	}
	return os.WriteFile(path, data, 0o644)
}

// input and output are porcupine's views of an Op.
type input struct {
	key   string
	kind  Kind
	value string
}

type output struct {
	value   string
	unknown bool
}

// registerModel is a set of independent registers, one per key, each
// holding the last value written ("" until the first write). Checked per
// key, which keeps the search small.
var registerModel = porcupine.Model{
	Partition: func(history []porcupine.Operation) [][]porcupine.Operation {
		byKey := map[string][]porcupine.Operation{}
		var keys []string
		for _, op := range history {
			k := op.Input.(input).key
			if _, ok := byKey[k]; !ok {
				keys = append(keys, k)
			}
			byKey[k] = append(byKey[k], op)
		}
		sort.Strings(keys)
		out := make([][]porcupine.Operation, 0, len(keys))
		for _, k := range keys {
			out = append(out, byKey[k])
		}
		return out
	},
	Init: func() any { return "" },
	Step: func(state, in, out any) (bool, any) {
		i, o := in.(input), out.(output)
		if i.kind == Write {
			return true, i.value // acknowledged or unknown: it took effect here
		}
		return o.value == state.(string), state
	},
	DescribeOperation: func(in, out any) string {
		i, o := in.(input), out.(output)
		if i.kind == Write {
			if o.unknown {
				return fmt.Sprintf("write(%s, %q) -> ?", i.key, i.value)
			}
			return fmt.Sprintf("write(%s, %q)", i.key, i.value)
		}
		return fmt.Sprintf("read(%s) -> %q", i.key, o.value)
	},
	DescribeState: func(state any) string { return fmt.Sprintf("%q", state) },
}

// porcupineOps converts a history. An unknown write may take effect at any
// time after its call, so it returns at the end of the history; a write
// that never took effect is one linearized after every read of its key, so
// nothing else is lost by that choice.
func porcupineOps(ops []Op) []porcupine.Operation {
	var end int64
	for _, op := range ops {
		end = max(end, op.Return, op.Call)
	}
	out := make([]porcupine.Operation, 0, len(ops))
	for _, op := range ops {
		ret := op.Return
		if op.Outcome == Unknown {
			ret = end + 1
		}
		out = append(out, porcupine.Operation{
			ClientId: op.Client,
			Input:    input{key: op.Key, kind: op.Kind, value: op.Value},
			Call:     op.Call,
			Output:   output{value: op.Value, unknown: op.Outcome == Unknown},
			Return:   ret,
		})
	}
	return out
}

// Linearizable checks ops against the register model within timeout. It
// returns porcupine's verdict and the information to visualize it.
func Linearizable(ops []Op, timeout time.Duration) (porcupine.CheckResult, porcupine.LinearizationInfo) {
	return porcupine.CheckOperationsVerbose(registerModel, porcupineOps(ops), timeout)
}

// Visualize writes porcupine's HTML view of a check to path.
func Visualize(info porcupine.LinearizationInfo, path string) error {
	return porcupine.VisualizePath(registerModel, info, path)
}
