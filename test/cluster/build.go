// Package cluster runs real `drover server` processes for end-to-end and
// fault-injection tests: real raft, real gRPC on loopback, one process per
// server, each with its own data dir, stable ports and log file.
//
// Build the binary once from TestMain with Build, then start clusters with
// New. Everything a cluster starts (processes, connections, temporary
// directories) is cleaned up when the test ends, whether it passed or not;
// when it failed, the tail of every server's log is written to the test log.
//
// Methods that can fail the test (New, AddServer, the Wait methods and the
// process controls of Server) call t.Fatal and so must be called from the
// test's own goroutine. Conn, ID, RPCAddr, RaftAddr, Running and Paused may be
// called from any goroutine.
package cluster

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
)

// Package is the import path of the drover command.
const Package = "github.com/droverhq/drover/cmd/drover"

// Build builds the drover binary into dir and returns its path. Call it once
// from TestMain; the caller removes dir.
func Build(dir string) (binPath string, err error) {
	bin := filepath.Join(dir, "drover")
	cmd := exec.Command("go", "build", "-o", bin, Package)
	cmd.Env = os.Environ()
	out, err := cmd.CombinedOutput()
	if err != nil {
		return "", fmt.Errorf("go build %s: %w\n%s", Package, err, out)
	}
	return bin, nil
}
