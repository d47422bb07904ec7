package raftnode

import (
	"context"
	"fmt"
	"io"
	"log"
	"log/slog"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/hashicorp/go-hclog"
)

// LevelTrace is the slog level hclog's Trace maps to: below slog's Debug, so a
// handler at Debug still hides raft's very chatty trace output.
const LevelTrace = slog.LevelDebug - 4

// hclogAdapter implements hclog.Logger on top of a *slog.Logger, so raft (and
// other HashiCorp libraries) log into the server's structured logger instead of
// hclog's own text writer.
type hclogAdapter struct {
	base    *slog.Logger // as given to NewHCLogger; name and implied args are layered on top
	logger  *slog.Logger // base + component + implied args; records are handled by its handler
	name    string
	implied []any
	// level is an extra floor shared by every logger derived from one
	// NewHCLogger call (hclog's SetLevel affects related loggers);
	// hclog.NoLevel means "whatever the slog handler enables".
	level *atomic.Int32
	// elections lowers raft's expected start-up election warnings; shared
	// like level.
	elections *electionLevels
}

var _ hclog.Logger = (*hclogAdapter)(nil)

// NewHCLogger returns an hclog.Logger that writes to l (slog.Default() if nil).
// name becomes the "component" attribute and Named extends it with dots
// ("raft", "raft.snapshot"). hclog's Trace maps to LevelTrace and Debug, Info,
// Warn and Error to the slog levels of the same name, except raft's election
// warnings before any leader is known, which are INFO (electionLevels).
//
// SetLevel sets a floor shared by all loggers derived from the returned one; it
// can only hide records, never make the slog handler emit below its own level.
func NewHCLogger(l *slog.Logger, name string) hclog.Logger {
	if l == nil {
		l = slog.Default()
	}
	return (&hclogAdapter{base: l, level: new(atomic.Int32), elections: new(electionLevels)}).derive(name, nil)
}

// derive builds a sibling logger with the given name and implied args. The slog
// logger is rebuilt from base because slog cannot replace an attribute, and
// Named/ResetNamed must change "component" rather than add a second one.
func (a *hclogAdapter) derive(name string, implied []any) *hclogAdapter {
	l := a.base
	if name != "" {
		l = l.With(slog.String("component", name))
	}
	if len(implied) > 0 {
		l = l.With(attrsAny(implied)...)
	}
	return &hclogAdapter{base: a.base, logger: l, name: name, implied: implied, level: a.level, elections: a.elections}
}

func toSlogLevel(l hclog.Level) slog.Level {
	switch l {
	case hclog.Trace:
		return LevelTrace
	case hclog.Debug:
		return slog.LevelDebug
	case hclog.Warn:
		return slog.LevelWarn
	case hclog.Error:
		return slog.LevelError
	default: // Info, and NoLevel which hclog treats as a plain message
		return slog.LevelInfo
	}
}

func (a *hclogAdapter) enabled(l hclog.Level) bool {
	if l == hclog.NoLevel {
		l = hclog.Info
	}
	if l >= hclog.Off {
		return false
	}
	if floor := hclog.Level(a.level.Load()); floor != hclog.NoLevel && l < floor {
		return false
	}
	return a.logger.Handler().Enabled(context.Background(), toSlogLevel(l))
}

// emit builds the record by hand (the pattern slog documents for wrappers) so
// the source position is the caller's, skip frames above emit. raft's
// expected start-up election warnings are lowered first (electionLevels).
func (a *hclogAdapter) emit(skip int, l hclog.Level, msg string, args []any) {
	l = a.elections.level(l, msg, args)
	if !a.enabled(l) {
		return
	}
	var pcs [1]uintptr
	runtime.Callers(skip+2, pcs[:]) // +2: runtime.Callers and emit itself
	r := slog.NewRecord(time.Now(), toSlogLevel(l), msg, pcs[0])
	r.Add(attrsAny(args)...)
	_ = a.logger.Handler().Handle(context.Background(), r)
}

// attrsAny turns hclog's alternating key/value args into slog.Attrs, keeping
// hclog's conventions: a dangling value gets key EXTRA_VALUE_AT_END and the
// hclog formatting wrappers (Fmt, Hex, Quote, ...) are rendered as hclog would.
func attrsAny(args []any) []any {
	out := make([]any, 0, (len(args)+1)/2)
	for i := 0; i < len(args); i += 2 {
		if i+1 == len(args) {
			out = append(out, slog.Any(hclog.MissingKey, hclogValue(args[i])))
			break
		}
		key, ok := args[i].(string)
		if !ok {
			key = fmt.Sprint(args[i])
		}
		out = append(out, slog.Any(key, hclogValue(args[i+1])))
	}
	return out
}

func hclogValue(v any) any {
	switch v := v.(type) {
	case hclog.Format:
		if len(v) > 0 {
			if f, ok := v[0].(string); ok {
				return fmt.Sprintf(f, v[1:]...)
			}
		}
		return fmt.Sprint(v...)
	case hclog.Hex:
		return "0x" + strconv.FormatUint(uint64(v), 16)
	case hclog.Octal:
		return "0" + strconv.FormatUint(uint64(v), 8)
	case hclog.Binary:
		return "0b" + strconv.FormatUint(uint64(v), 2)
	case hclog.Quote:
		return strconv.Quote(string(v))
	}
	return v
}

// Log emits msg at the given hclog level.
func (a *hclogAdapter) Log(l hclog.Level, msg string, args ...any) { a.emit(1, l, msg, args) }

// Trace emits msg at LevelTrace.
func (a *hclogAdapter) Trace(msg string, args ...any) { a.emit(1, hclog.Trace, msg, args) }

// Debug emits msg at slog.LevelDebug.
func (a *hclogAdapter) Debug(msg string, args ...any) { a.emit(1, hclog.Debug, msg, args) }

// Info emits msg at slog.LevelInfo.
func (a *hclogAdapter) Info(msg string, args ...any) { a.emit(1, hclog.Info, msg, args) }

// Warn emits msg at slog.LevelWarn.
func (a *hclogAdapter) Warn(msg string, args ...any) { a.emit(1, hclog.Warn, msg, args) }

// Error emits msg at slog.LevelError.
func (a *hclogAdapter) Error(msg string, args ...any) { a.emit(1, hclog.Error, msg, args) }

// IsTrace reports whether Trace records would be emitted.
func (a *hclogAdapter) IsTrace() bool { return a.enabled(hclog.Trace) }

// IsDebug reports whether Debug records would be emitted.
func (a *hclogAdapter) IsDebug() bool { return a.enabled(hclog.Debug) }

// IsInfo reports whether Info records would be emitted.
func (a *hclogAdapter) IsInfo() bool { return a.enabled(hclog.Info) }

// IsWarn reports whether Warn records would be emitted.
func (a *hclogAdapter) IsWarn() bool { return a.enabled(hclog.Warn) }

// IsError reports whether Error records would be emitted.
func (a *hclogAdapter) IsError() bool { return a.enabled(hclog.Error) }

// ImpliedArgs returns the key/value pairs added with With.
func (a *hclogAdapter) ImpliedArgs() []any { return slices.Clone(a.implied) }

// With returns a logger that adds args to every record.
func (a *hclogAdapter) With(args ...any) hclog.Logger {
	return a.derive(a.name, append(slices.Clone(a.implied), args...))
}

// Name returns the logger's name, the value of its "component" attribute.
func (a *hclogAdapter) Name() string { return a.name }

// Named returns a logger whose name is this one's extended with "."+name.
func (a *hclogAdapter) Named(name string) hclog.Logger {
	if a.name != "" {
		name = a.name + "." + name
	}
	return a.derive(name, a.implied)
}

// ResetNamed returns a logger named exactly name.
func (a *hclogAdapter) ResetNamed(name string) hclog.Logger { return a.derive(name, a.implied) }

// SetLevel sets the floor shared by all related loggers (see NewHCLogger);
// hclog.NoLevel removes it.
func (a *hclogAdapter) SetLevel(l hclog.Level) { a.level.Store(int32(l)) }

// GetLevel returns the floor set with SetLevel, or else the lowest hclog level
// the slog handler enables (Off if none).
func (a *hclogAdapter) GetLevel() hclog.Level {
	if l := hclog.Level(a.level.Load()); l != hclog.NoLevel {
		return l
	}
	for l := hclog.Trace; l < hclog.Off; l++ {
		if a.enabled(l) {
			return l
		}
	}
	return hclog.Off
}

// StandardLogger returns a *log.Logger writing through StandardWriter.
func (a *hclogAdapter) StandardLogger(opts *hclog.StandardLoggerOptions) *log.Logger {
	return log.New(a.StandardWriter(opts), "", 0)
}

// StandardWriter returns a writer that emits each write as one record at Info,
// or opts.ForceLevel, or the level of a "[WARN]"-style prefix with
// opts.InferLevels (InferLevelsWithTimestamp is not supported).
func (a *hclogAdapter) StandardWriter(opts *hclog.StandardLoggerOptions) io.Writer {
	if opts == nil {
		opts = &hclog.StandardLoggerOptions{}
	}
	return &stdWriter{a: a, opts: *opts}
}

type stdWriter struct {
	a    *hclogAdapter
	opts hclog.StandardLoggerOptions
}

func (w *stdWriter) Write(p []byte) (int, error) {
	msg := strings.TrimRight(string(p), "\r\n")
	level := hclog.Info
	inferred, rest := splitLevelPrefix(msg)
	switch {
	case w.opts.ForceLevel != hclog.NoLevel:
		level, msg = w.opts.ForceLevel, rest
	case w.opts.InferLevels && inferred != hclog.NoLevel:
		level, msg = inferred, rest
	}
	w.a.emit(1, level, msg, nil)
	return len(p), nil
}

// splitLevelPrefix recognises the "[LEVEL] msg" convention of pre-hclog code.
func splitLevelPrefix(msg string) (hclog.Level, string) {
	for _, p := range [...]struct {
		prefix string
		level  hclog.Level
	}{
		{"[TRACE]", hclog.Trace}, {"[DEBUG]", hclog.Debug}, {"[INFO]", hclog.Info},
		{"[WARN]", hclog.Warn}, {"[ERROR]", hclog.Error}, {"[ERR]", hclog.Error},
	} {
		if rest, ok := strings.CutPrefix(msg, p.prefix); ok {
			return p.level, strings.TrimSpace(rest)
		}
	}
	return hclog.NoLevel, msg
}
