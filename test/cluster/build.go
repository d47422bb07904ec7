// Package cluster runs real `drover server` processes for end-to-end and
// fault-injection tests: real raft, real gRPC on loopback, one process per
// server, each with its own data dir, stable ports and log file.
//
// Build the binary once from TestMain with Build, then start clusters with
// New. BuildVersion builds it as another release, and ServerBinary, Binary
// and Server.SetBinary run servers from such binaries, for clusters that
// mix releases. BuildCommand builds another command of the module that a
// test runs beside the servers (the operator flood's client). Everything a cluster starts (processes, connections, temporary
// directories) is cleaned up when the test ends, whether it passed or not;
// when it failed, the tail of every server's log is written to the test log.
//
// Methods that can fail the test (New, AddServer, the Wait methods, the
// partition methods and the process controls of Server) call t.Fatal and so
// must be called from the test's own goroutine. Conn, ID, RPCAddr, RaftAddr,
// Running and Paused may be called from any goroutine.
//
// # Network partitions
//
// By default every server listens on loopback ports of its own. With the
// Netns option each server sN of a cluster runs in a network namespace of
// its own instead, with the address .(10+N) of a /24 and ports 4650 (gRPC)
// and 4651 (raft); a veth pair joins each namespace to one bridge in the
// root namespace, where the test process holds the address .1. The test's
// clients therefore reach every server whatever the partition: partitions
// are between servers. The process is started as ip netns exec NS drover
// server ..., which enters the namespace and execs drover without forking,
// so Pid, Kill, Pause and Resume act on the server itself and the
// parent-death signal that kills it with a dying test binary still
// applies. Restart and AddServer work as without Netns; a server
// added during a partition reaches everyone. Proxy listens on loopback,
// which the namespaces do not reach.
//
// Partition(groups...), Isolate(s), Bridge(s) and Heal() change the
// topology while everything runs. A cut from A to B is a policy rule in B's
// namespace that drops every packet arriving from A's address before
// routing delivers it (the rule comes ahead of the local table): nothing
// answers, so A's connection attempts time out, and packets of connections
// established before the cut, such as raft's pooled connections and the
// forwarding connections between servers, vanish as well. Partition cuts
// both directions between servers of different groups and leaves a server
// named in no group linked to everyone. Isolate, Partition and Bridge
// replace the cuts in force; CutOneWay(A, B) adds the cut from A to B
// alone: A still receives what B sends, but over TCP that lasts only until
// B's unacknowledged data fills its window (A's acknowledgements are lost),
// and no new connection forms in either direction (a SYN from A, or A's
// SYN-ACK to B, is dropped). Cuts belong to the namespaces, so they survive
// a server's restart.
//
// The namespaces, veths and bridge are named drvt<slot>s<N> and
// drvt<slot>b, where the slot k is the /24 10.213.k.0/24 that the cluster
// holds through an flock on /run/drover-test-netns/<k>.lock: parallel tests
// and test binaries never share a slot, and whatever carries the name of a
// slot that no live process holds was left by a test process that died; New
// removes it. While a slot is held, an unreachable route covers its /24 in
// the root namespace, so nothing sent to its addresses leaves by the
// default route before the bridge is up or after it is gone. Everything is
// removed when the test ends. A test with Netns is skipped where the
// machine cannot give it namespaces: not root, no ip command (iproute2),
// or the kernel refuses (an unprivileged container).
package cluster

import (
	"fmt"
	"os"
	"os/exec"
	"path"
	"path/filepath"
)

// Package is the import path of the drover command.
const Package = "github.com/droverhq/drover/cmd/drover"

// Build builds the drover binary into dir and returns its path. Call it once
// from TestMain; the caller removes dir.
func Build(dir string) (binPath string, err error) {
	return build(filepath.Join(dir, "drover"))
}

// VersionVar is the variable that holds the release a binary runs as.
const VersionVar = "github.com/droverhq/drover/internal/version.Version"

// BuildVersion builds the drover binary into dir as release version (set
// with -ldflags -X, as a release build does) and returns its path, so that
// a test can run servers of different releases from one source tree: a
// binary built as an older release announces that release and knows only
// its raft entry types. The caller removes dir.
func BuildVersion(dir, version string) (binPath string, err error) {
	return build(filepath.Join(dir, "drover-"+version), "-ldflags", "-X "+VersionVar+"="+version)
}

// BuildCommand builds the command pkg (an import path) into dir, named
// after the last element of pkg, and returns its path. Like Build it builds
// without the race detector, whatever the test binary was built with. The
// caller removes dir.
func BuildCommand(dir, pkg string) (binPath string, err error) {
	return buildPackage(filepath.Join(dir, path.Base(pkg)), pkg)
}

func build(bin string, flags ...string) (string, error) {
	return buildPackage(bin, Package, flags...)
}

func buildPackage(bin, pkg string, flags ...string) (string, error) {
	args := append([]string{"build", "-o", bin}, flags...)
	cmd := exec.Command("go", append(args, pkg)...)
	cmd.Env = os.Environ()
	out, err := cmd.CombinedOutput()
	if err != nil {
		return "", fmt.Errorf("go build %s: %w\n%s", pkg, err, out)
	}
	return bin, nil
}
