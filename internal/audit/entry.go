package audit

import (
	"bytes"
	"encoding/json"
	"sync"
	"time"
)

// Entry is one line of the audit log.
type Entry struct {
	// Time is when the call was made, written in RFC 3339 in UTC with all
	// nine digits of nanoseconds, so that lines sort by time as text. Write
	// fills in the current time when it is zero.
	Time time.Time `json:"time"`
	// Accessor is who called: a token's accessor id (never the secret
	// itself), "anonymous", "acls-disabled", "server", or "node:<node id>".
	Accessor string `json:"accessor"`
	// Method is the full gRPC method, e.g. /drover.v1.JobService/Register.
	Method string `json:"method"`
	// Peer is the remote address of the caller.
	Peer string `json:"peer,omitempty"`
	// IDs are the ids the request names, as RequestIDs returns them.
	IDs map[string]string `json:"ids,omitempty"`
	// Code is the name of the call's gRPC status code, e.g. "OK",
	// "PermissionDenied".
	Code string `json:"code"`
	// Message is the error message of a call that did not end OK.
	Message string `json:"message,omitempty"`
	// Index is the raft index at which the write committed.
	Index uint64 `json:"index,omitempty"`
}

// encoder turns entries into lines. Pooled, because Write runs for every
// write call and a fresh buffer and encoder each time is garbage the server
// does not need.
type encoder struct {
	buf bytes.Buffer
	enc *json.Encoder
}

var encoders = sync.Pool{New: func() any {
	e := new(encoder)
	e.enc = json.NewEncoder(&e.buf)
	// The log is read by people and by jq, not by browsers: keep <, > and &
	// in error messages as they are.
	e.enc.SetEscapeHTML(false)
	return e
}}

// maxPooled is the largest buffer returned to a pool; an entry with a huge
// message should not pin its buffer for the life of the process.
const maxPooled = 64 << 10

// timeFormat is RFC 3339 with a fixed-width fraction: time.RFC3339Nano drops
// trailing zeros, and "…:07Z" then sorts after "…:07.5Z".
const timeFormat = "2006-01-02T15:04:05.000000000Z07:00"

// entryFields is Entry without its methods, embedded in wireEntry.
type entryFields Entry

// wireEntry is how an Entry is encoded: its Time field shadows the embedded
// one (encoding/json prefers the shallower of two fields with one name).
type wireEntry struct {
	Time string `json:"time"`
	entryFields
}

// encode returns e's JSON line, newline included, in a pooled encoder; the
// caller copies the line out and calls release.
func encode(e Entry) (*encoder, error) {
	if e.Time.IsZero() {
		e.Time = time.Now()
	}
	w := wireEntry{Time: e.Time.UTC().Format(timeFormat), entryFields: entryFields(e)}
	enc := encoders.Get().(*encoder)
	// Encode escapes control characters, so a newline in a message can
	// never split a line; it appends the terminating newline itself.
	if err := enc.enc.Encode(&w); err != nil {
		enc.release()
		return nil, err
	}
	return enc, nil
}

// line is the encoded entry; valid until release.
func (enc *encoder) line() []byte { return enc.buf.Bytes() }

func (enc *encoder) release() {
	if enc.buf.Cap() <= maxPooled {
		enc.buf.Reset()
		encoders.Put(enc)
	}
}
