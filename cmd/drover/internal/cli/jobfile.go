package cli

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"os"
	"slices"
	"strings"
	"time"

	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/types/known/durationpb"

	droverv1 "github.com/droverhq/drover/proto/drover/v1"
)

// readJobFile reads and parses the job file at path; "-" reads stdin.
func readJobFile(path string, stdin io.Reader) (*droverv1.Job, error) {
	var (
		data []byte
		err  error
	)
	if path == "-" {
		data, err = io.ReadAll(stdin)
	} else {
		data, err = os.ReadFile(path)
	}
	if err != nil {
		return nil, fmt.Errorf("reading job file: %w", err)
	}
	name := path
	if path == "-" {
		name = "<stdin>"
	}
	job, err := parseJob(data)
	if err != nil {
		return nil, fmt.Errorf("job file %s: %w", name, err)
	}
	return job, nil
}

// openJobFile reads the one job file args names ("-" for stdin) and opens a
// session to the servers; closeSession ends it.
func openJobFile(ctx context.Context, args []string, stdin io.Reader, opts *clientOptions, stderr io.Writer) (context.Context, *session, *droverv1.Job, func(), error) {
	if len(args) != 1 {
		return nil, nil, nil, nil, usageErrorf("give exactly one job file, or - to read it from stdin")
	}
	job, err := readJobFile(args[0], stdin)
	if err != nil {
		return nil, nil, nil, nil, err
	}
	ctx, s, closeSession, err := openSession(ctx, opts, stderr)
	if err != nil {
		return nil, nil, nil, nil, err
	}
	return ctx, s, job, closeSession, nil
}

// parseJob decodes a job file: a droverv1.Job in the protobuf JSON mapping.
// Durations are google.protobuf.Duration, which protojson reads itself
// ("30s", "1.5s"); Go's longer forms ("5m", "1h30m") are rewritten to
// protojson's seconds first. Unknown fields are errors
// naming their path, so that a misspelt field never silently goes missing.
func parseJob(data []byte) (*droverv1.Job, error) {
	if len(bytes.TrimSpace(data)) == 0 {
		return nil, errors.New("empty: want a JSON object describing the job")
	}
	var doc any
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber() // keep 64-bit integers exact when re-encoding
	if err := dec.Decode(&doc); err != nil {
		return nil, jsonSyntaxError(data, err)
	}
	if dec.More() {
		return nil, errors.New("more than one JSON value: want a single object describing the job")
	}
	obj, ok := doc.(map[string]any)
	if !ok {
		return nil, errors.New("not a JSON object: want an object describing the job")
	}
	changed, err := normalizeMessage("", (&droverv1.Job{}).ProtoReflect().Descriptor(), obj)
	if err != nil {
		return nil, err
	}
	if changed {
		// Re-encode only when a duration such as "5m" was converted, so that protojson's
		// line numbers refer to the file as written whenever possible.
		if data, err = json.Marshal(obj); err != nil {
			return nil, err
		}
	}
	job := &droverv1.Job{}
	if err := (protojson.UnmarshalOptions{DiscardUnknown: false}).Unmarshal(data, job); err != nil {
		return nil, protojsonError(err, !changed)
	}
	return job, nil
}

// protojsonError rewords protojson's "proto: (line 1:54): invalid value
// for int32 field count" as "line 1, column 54: invalid value ...". The
// position is dropped when it refers to re-encoded JSON rather than the
// file (filePositions false).
func protojsonError(err error, filePositions bool) error {
	msg := strings.TrimLeft(strings.TrimPrefix(err.Error(), "proto:"), " \u00a0")
	var line, col int
	if n, scanErr := fmt.Sscanf(msg, "(line %d:%d): ", &line, &col); scanErr == nil && n == 2 {
		msg = msg[strings.Index(msg, "): ")+len("): "):]
		if filePositions {
			msg = fmt.Sprintf("line %d, column %d: %s", line, col, msg)
		}
	}
	return errors.New(msg)
}

// jsonSyntaxError names the line and column of a JSON syntax error.
func jsonSyntaxError(data []byte, err error) error {
	var syn *json.SyntaxError
	if !errors.As(err, &syn) {
		if errors.Is(err, io.ErrUnexpectedEOF) {
			return errors.New("invalid JSON: unexpected end of file")
		}
		return fmt.Errorf("invalid JSON: %w", err)
	}
	// Offset counts the bytes read, the offending one included: it is
	// the offending byte's 1-based position.
	before := data[:min(int(syn.Offset), len(data))]
	line := bytes.Count(before, []byte("\n")) + 1
	col := len(before) - (bytes.LastIndexByte(before, '\n') + 1)
	return fmt.Errorf("invalid JSON at line %d, column %d: %w", line, col, err)
}

// normalizeMessage walks one JSON object of the message md: it rejects keys
// that name no field, converts duration strings to nanoseconds, and recurses
// into nested messages. It reports whether it changed obj. Values of the
// wrong type are left for protojson, which names the field.
func normalizeMessage(path string, md protoreflect.MessageDescriptor, obj map[string]any) (bool, error) {
	changed := false
	for _, key := range slices.Sorted(maps.Keys(obj)) {
		fd := fieldByJSONKey(md, key)
		fieldPath := joinPath(path, key)
		if fd == nil {
			return false, fmt.Errorf("%s: unknown field%s", fieldPath, suggestField(md, key))
		}
		value := obj[key]
		switch {
		case fd.Kind() == protoreflect.MessageKind && fd.Message().FullName() == durationMessage:
			canonical, converted, err := durationMessageValue(value)
			if err != nil {
				return false, fmt.Errorf("%s: %w", fieldPath, err)
			}
			if converted {
				obj[key] = canonical
				changed = true
			}
		case fd.Kind() == protoreflect.MessageKind && !fd.IsMap():
			c, err := normalizeNested(fieldPath, fd, value)
			if err != nil {
				return false, err
			}
			changed = changed || c
		}
	}
	return changed, nil
}

// normalizeNested walks the value of a message field, or each element of a
// repeated one.
func normalizeNested(path string, fd protoreflect.FieldDescriptor, value any) (bool, error) {
	if !fd.IsList() {
		obj, ok := value.(map[string]any)
		if !ok {
			return false, nil
		}
		return normalizeMessage(path, fd.Message(), obj)
	}
	list, ok := value.([]any)
	if !ok {
		return false, nil
	}
	changed := false
	for i, elem := range list {
		obj, ok := elem.(map[string]any)
		if !ok {
			continue
		}
		c, err := normalizeMessage(fmt.Sprintf("%s[%d]", path, i), fd.Message(), obj)
		if err != nil {
			return false, err
		}
		changed = changed || c
	}
	return changed, nil
}

// durationMessage is the type of every duration of a job.
const durationMessage protoreflect.FullName = "google.protobuf.Duration"

// durationMessageValue converts a Go duration string ("5m", "1h30m") given
// for a google.protobuf.Duration field into protojson's form ("300s"),
// which accepts only seconds; a string protojson takes as it is ("30s",
// "1.5s") is left unchanged. A number is refused by name: releases before
// 0.3 took nanoseconds for some durations, and protojson's own error would
// not say what to write instead. Other values are left for protojson to
// judge.
func durationMessageValue(value any) (string, bool, error) {
	if n, ok := value.(json.Number); ok {
		return "", false, fmt.Errorf("%s is a number: write durations as strings such as \"30s\", \"5m\" or \"1h30m\" (nanoseconds are no longer accepted)", n)
	}
	s, ok := value.(string)
	if !ok {
		return "", false, nil
	}
	d, err := time.ParseDuration(s)
	if err != nil {
		return "", false, fmt.Errorf("invalid duration %q: want a duration such as \"30s\", \"5m\" or \"1h30m\"", s)
	}
	b, err := protojson.Marshal(durationpb.New(d))
	if err != nil {
		return "", false, fmt.Errorf("duration %q: %w", s, err)
	}
	var canonical string
	if err := json.Unmarshal(b, &canonical); err != nil {
		return "", false, fmt.Errorf("duration %q: %w", s, err)
	}
	return canonical, canonical != s, nil
}

// fieldByJSONKey finds the field a JSON key names: protojson accepts both
// the .proto name (max_client_disconnect) and the JSON name
// (maxClientDisconnect).
func fieldByJSONKey(md protoreflect.MessageDescriptor, key string) protoreflect.FieldDescriptor {
	if fd := md.Fields().ByJSONName(key); fd != nil {
		return fd
	}
	return md.Fields().ByName(protoreflect.Name(key))
}

// suggestField names the field closest to a misspelt key, when one is
// close enough to be what was meant.
func suggestField(md protoreflect.MessageDescriptor, key string) string {
	best, bestDist := "", 3 // more than two edits away is no suggestion
	fields := md.Fields()
	for i := range fields.Len() {
		name := string(fields.Get(i).Name())
		if d := editDistance(key, name); d < bestDist {
			best, bestDist = name, d
		}
	}
	if best == "" {
		return ""
	}
	return fmt.Sprintf(" (did you mean %q?)", best)
}

// editDistance is the Levenshtein distance between a and b.
func editDistance(a, b string) int {
	prev := make([]int, len(b)+1)
	cur := make([]int, len(b)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(a); i++ {
		cur[0] = i
		for j := 1; j <= len(b); j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
		}
		prev, cur = cur, prev
	}
	return prev[len(b)]
}

func joinPath(path, key string) string {
	if path == "" {
		return key
	}
	return path + "." + key
}
