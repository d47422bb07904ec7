package cli

import (
	"encoding/json"
	"fmt"
	"io"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"
	"unicode"

	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"
)

// none is shown for an empty id or time, as the Nomad CLI shows it.
const none = "<none>"

// enumName is how tables show an enum value: its name without the type's
// prefix, in lower case with words joined by hyphens, as the Nomad CLI
// shows them (JOB_TYPE_SERVICE is "service", EVAL_TRIGGER_JOB_REGISTER
// "job-register"). A value this build does not know, sent by a newer
// server, shows as its number.
func enumName(e protoreflect.Enum) string {
	v := e.Descriptor().Values().ByNumber(e.Number())
	if v == nil {
		return strconv.Itoa(int(e.Number()))
	}
	name := strings.TrimPrefix(string(v.Name()), enumPrefix(e.Descriptor()))
	return strings.ReplaceAll(strings.ToLower(name), "_", "-")
}

// enumPrefix is the prefix every value of an enum carries, as buf lint
// requires: the type's name in upper snake case (JobType: "JOB_TYPE_").
func enumPrefix(d protoreflect.EnumDescriptor) string {
	var b strings.Builder
	for i, r := range string(d.Name()) {
		if i > 0 && unicode.IsUpper(r) {
			b.WriteByte('_')
		}
		b.WriteRune(unicode.ToUpper(r))
	}
	b.WriteByte('_')
	return b.String()
}

// shortID is the first 8 characters of a UUID, as tables show ids.
func shortID(id string) string {
	if len(id) > 8 {
		return id[:8]
	}
	return id
}

// orNone shows an empty string as <none>.
func orNone(s string) string {
	if s == "" {
		return none
	}
	return s
}

// formatTime shows unix nanoseconds as an RFC 3339 time in the local zone.
func formatTime(ns int64) string {
	if ns == 0 {
		return none
	}
	return time.Unix(0, ns).Format(time.RFC3339)
}

// formatAgo shows unix nanoseconds as the time elapsed until now, in its two
// largest units ("4m12s ago"); more than a week ago, or in the future, it
// shows the time itself.
func formatAgo(ns int64, now time.Time) string {
	if ns == 0 {
		return none
	}
	d := now.Sub(time.Unix(0, ns))
	switch {
	case d < 0 || d >= 7*24*time.Hour:
		return formatTime(ns)
	case d < time.Minute:
		return fmt.Sprintf("%ds ago", int(d/time.Second))
	case d < time.Hour:
		return fmt.Sprintf("%dm%ds ago", int(d/time.Minute), int(d%time.Minute/time.Second))
	case d < 24*time.Hour:
		return fmt.Sprintf("%dh%dm ago", int(d/time.Hour), int(d%time.Hour/time.Minute))
	}
	return fmt.Sprintf("%dd%dh ago", int(d/(24*time.Hour)), int(d%(24*time.Hour)/time.Hour))
}

// plural counts a noun: "1 node", "3 nodes".
func plural(n int32, noun string) string {
	if n == 1 {
		return "1 " + noun
	}
	return fmt.Sprintf("%d %ss", n, noun)
}

// field is one "Key = value" line of a record.
type field struct{ key, value string }

// printFields writes a record as aligned "Key = value" lines, as the Nomad
// CLI prints one object.
func printFields(w io.Writer, fields []field) error {
	tw := tabwriter.NewWriter(w, 0, 0, 1, ' ', 0)
	for _, f := range fields {
		fmt.Fprintf(tw, "%s\t= %s\n", f.key, f.value)
	}
	return tw.Flush()
}

// jsonMessage is one message in the JSON form printJSON uses, to embed in
// an object printed with printJSONObject.
func jsonMessage(m proto.Message) (json.RawMessage, error) {
	return marshalJSON(m)
}

// jsonMessages is a list of messages as jsonMessage has them; never nil, so
// an empty list prints as [].
func jsonMessages[M proto.Message](ms []M) ([]json.RawMessage, error) {
	out := make([]json.RawMessage, 0, len(ms))
	for _, m := range ms {
		raw, err := jsonMessage(m)
		if err != nil {
			return nil, err
		}
		out = append(out, raw)
	}
	return out, nil
}

// printJSONObject.
func jsonValue[M proto.Message](ms ...M) ([]json.RawMessage, error) {
	out := make([]json.RawMessage, 0, len(ms))
	for _, m := range ms {
		raw, err := marshalJSON(m)
		if err != nil {
			return nil, err
		}
		out = append(out, raw)
	}
	return out, nil
}

// printJSONObject writes v, a struct whose fields are json.RawMessage
// values made by jsonMessage(s), as indented JSON. encoding/json re-indents the
// messages, so the output is stable byte for byte as printJSON's is.
func printJSONObject(w io.Writer, v any) error {
	out, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		return err
	}
	_, err = w.Write(append(out, '\n'))
	return err
}
