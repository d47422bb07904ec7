package test_test

import (
	"bytes"
	"context"
	"os"
	"os/exec"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/droverhq/drover/test/cluster"
)

// Markers around the README's shell examples that TestREADMEExamples
// runs.
const (
	readmeBegin = "<!-- readme-test: begin -->"
	readmeEnd   = "<!-- readme-test: end -->"
)

// prints is a line's note of text its output contains.
var prints = regexp.MustCompile(`#.*\bprints (.+)$`)

// readmeBlock is one marked block of the README: its shell (the indented
// code lines, unindented) and the texts its output must contain.
type readmeBlock struct {
	script string
	want   []string
}

func readmeBlocks(t *testing.T, readme string) []readmeBlock {
	t.Helper()
	var blocks []readmeBlock
	rest := readme
	for {
		_, after, ok := strings.Cut(rest, readmeBegin)
		if !ok {
			break
		}
		block, after, ok := strings.Cut(after, readmeEnd)
		if !ok {
			t.Fatalf("README: %q without %q", readmeBegin, readmeEnd)
		}
		var lines, want []string
		for _, line := range strings.Split(block, "\n") {
			if strings.TrimSpace(line) == "" {
				continue
			}
			code, ok := strings.CutPrefix(line, "    ")
			if !ok {
				t.Fatalf("README: a marked block holds a line that is not code: %q", line)
			}
			lines = append(lines, code)
			if m := prints.FindStringSubmatch(code); m != nil {
				want = append(want, strings.TrimSpace(m[1]))
			}
		}
		blocks = append(blocks, readmeBlock{script: strings.Join(lines, "\n"), want: want})
		rest = after
	}
	if len(blocks) == 0 {
		t.Fatalf("README has no block between %q and %q", readmeBegin, readmeEnd)
	}
	return blocks
}

// TestREADMEExamples runs the README's marked shell examples with bash
// against a real dev server (its addresses in DROVER_ADDR and
// DROVER_HTTP_ADDR, which the README reads) and fails when a command fails
// or the output lacks a text a "# prints" comment names.
func TestREADMEExamples(t *testing.T) {
	for _, tool := range []string{"bash", "curl", "go"} {
		if _, err := exec.LookPath(tool); err != nil {
			t.Skipf("the README's examples need %s, which is not installed: %v", tool, err)
		}
	}
	readme, err := os.ReadFile("../README.md")
	if err != nil {
		t.Fatal(err)
	}
	blocks := readmeBlocks(t, string(readme))

	c := cluster.New(t, droverBin, 1, cluster.Dev(), httpArgs())
	ctx := within(t, testContext(t), 5*time.Minute)
	s := c.WaitLeader(ctx)
	for i, b := range blocks {
		// Building grpcurl the first time takes most of the time.
		runCtx, cancel := context.WithTimeout(ctx, 4*time.Minute)
		cmd := exec.CommandContext(runCtx, "bash", "-euo", "pipefail", "-c", b.script)
		cmd.Dir = t.TempDir()
		cmd.Env = append(os.Environ(), "DROVER_ADDR="+s.RPCAddr(), "DROVER_HTTP_ADDR="+s.Info().HTTPAddr)
		var out bytes.Buffer
		cmd.Stdout, cmd.Stderr = &out, &out
		err := cmd.Run()
		cancel()
		if err != nil {
			t.Fatalf("README block %d failed: %v\n%s", i+1, err, out.String())
		}
		t.Logf("output of README block %d:\n%s", i+1, out.String())
		for _, w := range b.want {
			if !strings.Contains(out.String(), w) {
				t.Errorf("README block %d: the output lacks %s", i+1, w)
			}
		}
	}
}
