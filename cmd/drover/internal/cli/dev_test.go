package cli

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/droverhq/drover/internal/testserver"
	droverv1 "github.com/droverhq/drover/proto/drover/v1"
)

// TestSampleJobCopiesAgree keeps docs/examples/web.json equal to the copy
// `drover dev` embeds.
func TestSampleJobCopiesAgree(t *testing.T) {
	doc, err := os.ReadFile("../../../../docs/examples/web.json")
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(doc, sampleJob) {
		t.Error("docs/examples/web.json differs from cmd/drover/internal/cli/examples/web.json: copy the one you changed over the other")
	}
	if _, err := parseJob(sampleJob); err != nil {
		t.Errorf("the sample job does not parse: %v", err)
	}
	next := nextSampleVersion(sampleJob)
	if bytes.Equal(next, sampleJob) {
		t.Error("the sample job's next version is the same job: nextSampleVersion no longer finds what it changes")
	}
	if _, err := parseJob(next); err != nil {
		t.Errorf("the sample job's next version does not parse: %v", err)
	}
}

// TestDevRunsTheSampleJobAndCleansUp runs `drover dev` on free ports until
// the sample job's allocations run, then stops it: the data dir must be
// gone. At its default -log-level warn, as `make run` runs it, it starts
// quietly: nothing is logged by then.
func TestDevRunsTheSampleJobAndCleansUp(t *testing.T) {
	root := t.TempDir()
	o := &devOptions{rpcAddr: "127.0.0.1:0", raftAddr: "127.0.0.1:0", httpAddr: "127.0.0.1:0", simNodes: 5, logLevel: "warn", tempRoot: root}
	ctx, cancel := context.WithCancel(t.Context())
	out, logs := &syncBuffer{}, &syncBuffer{}
	var devErr error // set before stopped is closed
	stopped := make(chan struct{})
	go func() {
		defer close(stopped)
		devErr = runDev(ctx, o, out, logs)
	}()
	// However the test ends, drover dev must have returned before the
	// temp root (registered earlier, so removed later) goes.
	t.Cleanup(func() {
		cancel()
		if !devStopped(stopped) {
			t.Error("drover dev did not stop within 60s")
		}
	})

	addrRE := regexp.MustCompile(`a server on (\S+) with`)
	var addr string
	waitUntil(t, "the dev command to print its address", func() (bool, string) {
		if m := addrRE.FindStringSubmatch(out.String()); m != nil {
			addr = m[1]
			return true, ""
		}
		select {
		case <-stopped:
			t.Fatalf("drover dev ended early: %v", devErr)
		default:
		}
		return false, out.String()
	})
	conn := testserver.Dial(t, addr)
	allocs := droverv1.NewAllocServiceClient(conn)
	want := int(sampleJobCount(t))
	waitUntil(t, "the sample job's allocations running", func() (bool, string) {
		resp, err := allocs.List(ctx, &droverv1.ListAllocationsRequest{})
		if err != nil {
			return false, err.Error()
		}
		running := 0
		for _, a := range resp.GetAllocations() {
			if a.GetJobId() == "web" && a.GetClientStatus() == droverv1.AllocClientStatus_ALLOC_CLIENT_STATUS_RUNNING {
				running++
			}
		}
		return running == want, fmt.Sprintf("%d of %d running", running, want)
	})
	if logs.String() != "" {
		t.Errorf("drover dev did not start quietly; it logged:\n%s", logs.String())
	}
	for _, hint := range []string{"drover job status", "drover node status", "drover eval list", "EventService/Stream", "/v1/job/", "/metrics", "drover job run", "/ui/"} {
		if !bytes.Contains([]byte(out.String()), []byte(hint)) {
			t.Errorf("output does not mention %q:\n%s", hint, out.String())
		}
	}
	// The rollout it suggests works: job run follows it to its end.
	next := regexp.MustCompile(`drover job run -address \S+ (\S+web-v2\.json)`).FindStringSubmatch(out.String())
	if next == nil {
		t.Fatalf("output names no next version to roll out:\n%s", out.String())
	}
	if rolled, stderr, err := run(t, "job", "run", "-address", addr, "-timeout", "60s", next[1]); err != nil ||
		!strings.Contains(rolled, "successful: Deployment completed successfully") {
		t.Errorf("rolling out %s: %v\n%s%s", next[1], err, rolled, stderr)
	}
	cancel()
	if !devStopped(stopped) {
		t.Fatal("drover dev did not stop within 60s")
	}
	if devErr != nil {
		t.Fatal(devErr)
	}
	left, err := os.ReadDir(root)
	if err != nil {
		t.Fatal(err)
	}
	if len(left) != 0 {
		t.Errorf("drover dev left %d entries behind in its temp root, e.g. %s", len(left), left[0].Name())
	}
}

// devStopped waits up to 60s for stopped to close and reports whether it
// did.
func devStopped(stopped <-chan struct{}) bool {
	select {
	case <-stopped:
		return true
	case <-time.After(60 * time.Second):
		return false
	}
}

// sampleJobCount is the number of allocations the sample job asks for.
func sampleJobCount(t *testing.T) int32 {
	job, err := parseJob(sampleJob)
	if err != nil {
		t.Fatal(err)
	}
	var n int32
	for _, g := range job.GetTaskGroups() {
		n += g.GetCount()
	}
	return n
}

func TestDevRefusesABusyPort(t *testing.T) {
	srv := testserver.Start(t)
	o := &devOptions{rpcAddr: srv.RPCAddr(), raftAddr: "127.0.0.1:0", httpAddr: "127.0.0.1:0", simNodes: 1, logLevel: "error", tempRoot: t.TempDir()}
	err := runDev(t.Context(), o, io.Discard, io.Discard)
	if err == nil || !regexp.MustCompile(`in use.*-rpc-addr`).MatchString(err.Error()) {
		t.Fatalf("error %v, want one saying a port is in use", err)
	}
	if left, _ := os.ReadDir(o.tempRoot); len(left) != 0 {
		t.Errorf("a failed start left %d entries behind", len(left))
	}
}

func TestCommandName(t *testing.T) {
	dir := t.TempDir()
	built := filepath.Join(dir, "bin", "drover")
	installed := filepath.Join(dir, "usr", "bin", "drover")
	for _, p := range []string{built, installed} {
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte("#!/bin/sh\n"), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	onPath := func(string) (string, error) { return installed, nil }
	notOnPath := func(string) (string, error) { return "", exec.ErrNotFound }
	for _, tc := range []struct {
		arg0     string
		lookPath func(string) (string, error)
		want     string
	}{
		{built, notOnPath, built},                // make run: ./bin/drover dev
		{built, onPath, built},                   // another drover is on PATH
		{installed, onPath, "drover"},            // the one on PATH
		{"/tmp/x/cli.test", notOnPath, "drover"}, // run by a test binary
	} {
		if got := commandName(tc.arg0, tc.lookPath); got != tc.want {
			t.Errorf("commandName(%q) = %q, want %q", tc.arg0, got, tc.want)
		}
	}
}
