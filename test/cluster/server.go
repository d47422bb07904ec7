package cluster

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"time"

	"google.golang.org/grpc"

	"github.com/droverhq/drover/server"
)

// Time limits of the process controls.
const (
	// StartTimeout bounds how long a process may take to write its info
	// file (it writes it once it serves gRPC).
	StartTimeout = 30 * time.Second
	// StopTimeout bounds a clean shutdown after SIGTERM (the server's own
	// shutdown timeout is 10s).
	StopTimeout = 45 * time.Second
	// killTimeout bounds the wait for a killed process to be reaped.
	killTimeout = 10 * time.Second
)

// Server is one `drover server` of a cluster. Its ports, data dir, flags and
// log file stay the same across restarts.
type Server struct {
	c        *Cluster
	bin      string // the binary the next start runs (SetBinary)
	name     string // sN: data dir, log and info file names
	rpcAddr  string
	raftAddr string
	netns    string // the network namespace with Netns
	dataDir  string
	infoFile string
	logFile  string
	args     []string
	conn     *grpc.ClientConn
	mounted  bool // the data dir is a tmpfs of the harness (TmpfsDataDir)

	mu       sync.Mutex
	id       string // the raft id; learned from the info file with ServerIDFromDataDir
	cmd      *exec.Cmd
	done     chan struct{} // closed when the current process has exited
	exitErr  error
	running  bool
	paused   bool
	expected bool // the harness stopped or killed the current process
	runs     int
	runStart int64 // offset in the log file where the current run's output begins
	info     server.Info
}

// ID returns the server's raft id.
func (s *Server) ID() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.id
}

// String returns the server's raft id, for messages.
func (s *Server) String() string { return s.ID() }

// RPCAddr returns the server's gRPC address.
func (s *Server) RPCAddr() string { return s.rpcAddr }

// RaftAddr returns the server's raft listen address, which others reach
// unless it was started with -raft-advertise.
func (s *Server) RaftAddr() string { return s.raftAddr }

// DataDir returns the server's data dir (empty in dev mode, where the
// server picks a temporary one: see Info).
func (s *Server) DataDir() string { return s.dataDir }

// LogFile returns the path of the file that holds the output of every run
// of the server, each run introduced by a line starting with "--- harness".
func (s *Server) LogFile() string { return s.logFile }

// Info returns what the current (or last) run wrote to its info file.
func (s *Server) Info() server.Info {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.info
}

// Conn returns a connection to the server, dialed with drover's codec. It
// is the same connection for the whole test, across restarts: calls fail
// with Unavailable while the process is down and work again once it is
// back. Do not close it.
func (s *Server) Conn() *grpc.ClientConn { return s.conn }

// Dial returns a new connection to the server with the harness's settings
// (with TLS, the client certificate) plus opts, which win over them. It is
// closed when the test ends.
func (s *Server) Dial(opts ...grpc.DialOption) *grpc.ClientConn {
	s.c.t.Helper()
	conn, err := dial(s.rpcAddr, append(slices.Clone(s.c.opts.dial), opts...)...)
	if err != nil {
		s.c.t.Fatalf("dial %s: %v", s, err)
	}
	s.c.addCloser(conn.Close)
	return conn
}

// Pid returns the process id of the current (or last) run, or 0 if the
// server was never started; benchmarks read its CPU time from /proc.
func (s *Server) Pid() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.cmd == nil || s.cmd.Process == nil {
		return 0
	}
	return s.cmd.Process.Pid
}

// Running reports whether the server's process has been started and has
// not exited. A paused process is running.
func (s *Server) Running() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.running
}

// Paused reports whether the process is stopped with SIGSTOP.
func (s *Server) Paused() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.paused
}

// Kill kills the process with SIGKILL and waits for it to exit.
func (s *Server) Kill() {
	t := s.c.t
	t.Helper()
	s.mu.Lock()
	if !s.running {
		s.mu.Unlock()
		t.Fatalf("kill %s: not running", s)
	}
	s.expected = true
	cmd, done := s.cmd, s.done
	s.mu.Unlock()
	if err := cmd.Process.Signal(syscall.SIGKILL); err != nil && !errors.Is(err, os.ErrProcessDone) {
		t.Fatalf("kill %s: %v", s, err)
	}
	select {
	case <-done:
	case <-time.After(killTimeout):
		t.Fatalf("%s did not exit within %s of SIGKILL", s, killTimeout)
	}
	t.Logf("cluster: killed %s", s)
}

// Stop stops the process with SIGTERM (after SIGCONT if it is paused) and
// waits for it to exit. It fails the test unless the process exits cleanly
// (status 0) within StopTimeout.
func (s *Server) Stop() {
	s.c.t.Helper()
	s.StopWith(syscall.SIGTERM)
}

// StopWith is Stop with another signal, such as SIGINT.
func (s *Server) StopWith(sig syscall.Signal) {
	t := s.c.t
	t.Helper()
	s.mu.Lock()
	if !s.running {
		s.mu.Unlock()
		t.Fatalf("stop %s: not running", s)
	}
	s.expected = true
	cmd, done, paused := s.cmd, s.done, s.paused
	s.mu.Unlock()
	if err := cmd.Process.Signal(sig); err != nil {
		t.Fatalf("stop %s: %v", s, err)
	}
	if paused {
		if err := cmd.Process.Signal(syscall.SIGCONT); err != nil {
			t.Fatalf("stop %s: SIGCONT: %v", s, err)
		}
	}
	select {
	case <-done:
	case <-time.After(StopTimeout):
		quitForStacks(cmd, done)
		t.Fatalf("%s did not exit within %s of %s; sent SIGQUIT for a stack dump (in %s)\n%s", s, StopTimeout, sig, s.logFile, s.tail(logTailLines))
	}
	s.mu.Lock()
	err := s.exitErr
	s.mu.Unlock()
	if err != nil {
		t.Fatalf("%s exited uncleanly after %s: %v\n%s", s, sig, err, s.tail(logTailLines))
	}
	t.Logf("cluster: stopped %s with %s", s, sig)
}

// quitForStacks ends a process that did not exit when it should have with
// SIGQUIT, which makes the Go runtime write every goroutine's stack into
// the log and so shows where it hangs; SIGKILL if even that does not end
// it. done is closed when the process has exited.
func quitForStacks(cmd *exec.Cmd, done <-chan struct{}) {
	_ = cmd.Process.Signal(syscall.SIGQUIT)
	select {
	case <-done:
	case <-time.After(killTimeout):
		_ = cmd.Process.Signal(syscall.SIGKILL)
		<-done
	}
}

// Signal sends sig to the running process, e.g. SIGHUP to make it reload
// its TLS files. It does not wait for anything: the test waits for what the
// signal should cause. Use Stop, Kill or Pause for the signals that end or
// stop the process, so that the harness knows.
func (s *Server) Signal(sig syscall.Signal) {
	t := s.c.t
	t.Helper()
	s.mu.Lock()
	running, cmd := s.running, s.cmd
	s.mu.Unlock()
	if !running {
		t.Fatalf("signal %s to %s: not running", sig, s)
	}
	if err := cmd.Process.Signal(sig); err != nil {
		t.Fatalf("signal %s to %s: %v", sig, s, err)
	}
	t.Logf("cluster: sent %s to %s", sig, s)
}

// Pause stops the process with SIGSTOP and waits until it is stopped.
func (s *Server) Pause() {
	t := s.c.t
	t.Helper()
	s.mu.Lock()
	if !s.running || s.paused {
		running, paused := s.running, s.paused
		s.mu.Unlock()
		t.Fatalf("pause %s: running %v, paused %v", s, running, paused)
	}
	cmd := s.cmd
	s.paused = true
	s.mu.Unlock()
	if err := cmd.Process.Signal(syscall.SIGSTOP); err != nil {
		t.Fatalf("pause %s: %v", s, err)
	}
	s.waitStopped(cmd.Process.Pid, true)
	t.Logf("cluster: paused %s", s)
}

// Resume continues a paused process with SIGCONT.
func (s *Server) Resume() {
	t := s.c.t
	t.Helper()
	s.mu.Lock()
	if !s.running || !s.paused {
		running, paused := s.running, s.paused
		s.mu.Unlock()
		t.Fatalf("resume %s: running %v, paused %v", s, running, paused)
	}
	cmd := s.cmd
	s.paused = false
	s.mu.Unlock()
	if err := cmd.Process.Signal(syscall.SIGCONT); err != nil {
		t.Fatalf("resume %s: %v", s, err)
	}
	s.waitStopped(cmd.Process.Pid, false)
	t.Logf("cluster: resumed %s", s)
}

// waitStopped polls the process state until it is (or is no longer)
// stopped.
func (s *Server) waitStopped(pid int, want bool) {
	t := s.c.t
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for {
		got, err := stopped(pid)
		if errors.Is(err, errUnobservable) || err == nil && got == want {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: process %d stopped=%v, want %v, 5s after the signal (%v)", s, pid, got, want, err)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// Restart starts the server again with the same ports, data dir and flags,
// and waits until it serves gRPC. A running server is stopped first (Stop).
func (s *Server) Restart() {
	t := s.c.t
	t.Helper()
	if s.Running() {
		s.Stop()
	}
	s.start()
	s.waitStarted()
	t.Logf("cluster: restarted %s", s)
}

// RestartWith is Restart with extra flags for this run only, after the
// server's own (e.g. -rebuild-from-peers).
func (s *Server) RestartWith(args ...string) {
	t := s.c.t
	t.Helper()
	if s.Running() {
		s.Stop()
	}
	s.startRun(false, args...)
	s.waitStarted()
	t.Logf("cluster: restarted %s with %s", s, strings.Join(args, " "))
}

// StartRefused starts a server that is not running, with extra flags for
// this run only, and expects it to refuse to start: to exit without ever
// serving. It fails the test if the process writes its info file or has not
// exited within StartTimeout. It returns the exit error (an
// *exec.ExitError for a non-zero status) and everything the run wrote to
// its log.
func (s *Server) StartRefused(args ...string) (exitErr error, output string) {
	t := s.c.t
	t.Helper()
	if s.Running() {
		t.Fatalf("start %s: already running", s)
	}
	s.startRun(true, args...)
	s.mu.Lock()
	done, cmd := s.done, s.cmd
	s.mu.Unlock()
	select {
	case <-done:
	case <-time.After(StartTimeout):
		_ = cmd.Process.Signal(syscall.SIGKILL)
		<-done
		t.Fatalf("%s was expected to refuse to start but still ran after %s\n%s", s, StartTimeout, s.tail(logTailLines))
	}
	if _, err := os.Stat(s.infoFile); err == nil {
		t.Fatalf("%s was expected to refuse to start but served (it wrote its info file)\n%s", s, s.tail(logTailLines))
	}
	s.mu.Lock()
	exitErr = s.exitErr
	s.mu.Unlock()
	t.Logf("cluster: %s refused to start: %v", s, exitErr)
	return exitErr, s.RunOutput()
}

// RunOutput returns everything the current (or last) run of the server
// wrote to its log file.
func (s *Server) RunOutput() string {
	s.mu.Lock()
	offset := s.runStart
	s.mu.Unlock()
	data, err := os.ReadFile(s.logFile)
	if err != nil || int64(len(data)) < offset {
		return ""
	}
	return string(data[offset:])
}

// removeAll removes dir, or only what is in it when it is a mount point.
func removeAll(dir string, mountPoint bool) error {
	if !mountPoint {
		return os.RemoveAll(dir)
	}
	entries, err := os.ReadDir(dir)
	if err != nil {
		return err
	}
	for _, e := range entries {
		if err := os.RemoveAll(filepath.Join(dir, e.Name())); err != nil {
			return err
		}
	}
	return nil
}

// Wipe removes the data dir of a server that is not running, so that its
// next start is that of a new server with the same id and addresses.
func (s *Server) Wipe() {
	t := s.c.t
	t.Helper()
	if s.Running() {
		t.Fatalf("wipe %s: the server is running", s)
	}
	if s.dataDir == "" {
		t.Fatalf("wipe %s: dev servers have no data dir of the harness's", s)
	}
	if err := removeAll(s.dataDir, s.mounted); err != nil {
		t.Fatalf("wipe %s: %v", s, err)
	}
	t.Logf("cluster: wiped the data dir of %s", s)
}

// SetBinary makes the server's next start run bin (e.g. a newer release
// built by BuildVersion), with the same flags, data dir and ports. Call it
// while the server is stopped, then Restart it.
func (s *Server) SetBinary(bin string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.bin = bin
}

// RunToExit starts a stopped server whose process is expected to exit by
// itself (a server that halts), waits up to timeout for the exit and
// returns the process's exit error: nil for status 0, an *exec.ExitError
// otherwise. The exit does not count as a crash. A process still running
// after timeout is killed and fails the test.
func (s *Server) RunToExit(timeout time.Duration) error {
	t := s.c.t
	t.Helper()
	if s.Running() {
		t.Fatalf("run %s to its exit: it is running", s)
	}
	s.startRun(true)
	s.mu.Lock()
	done := s.done
	s.mu.Unlock()
	select {
	case <-done:
	case <-time.After(timeout):
		s.mu.Lock()
		s.expected = true
		cmd := s.cmd
		s.mu.Unlock()
		quitForStacks(cmd, done)
		t.Fatalf("%s did not exit within %s; sent SIGQUIT for a stack dump (in %s)\n%s", s, timeout, s.logFile, s.tail(logTailLines))
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.exitErr
}

// start starts the process; waitStarted waits for it to serve.
func (s *Server) start() { s.startRun(false) }

// startRun starts the process. expectExit says that the process is to
// exit by itself: its exit is then no crash.
//
// extra are flags for this run only, after the server's own.
func (s *Server) startRun(expectExit bool, extra ...string) {
	t := s.c.t
	t.Helper()
	if err := os.Remove(s.infoFile); err != nil && !errors.Is(err, os.ErrNotExist) {
		t.Fatal(err)
	}
	out, err := os.OpenFile(s.logFile, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		t.Fatal(err)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.runs++
	line := append(s.commandLine(), extra...)
	if _, err := fmt.Fprintf(out, "--- harness: run %d of %s at %s: %s\n", s.runs, s.name,
		time.Now().Format(time.RFC3339Nano), strings.Join(line, " ")); err != nil {
		_ = out.Close()
		t.Fatal(err)
	}
	offset, err := out.Seek(0, 2)
	if err != nil {
		_ = out.Close()
		t.Fatal(err)
	}
	cmd := exec.Command(line[0], line[1:]...)
	// Temporary files (a dev server's data dir) go in the test's dir: a
	// server killed without a clean shutdown cannot remove them itself.
	cmd.Env = append(childEnv(), "TMPDIR="+filepath.Dir(s.logFile))
	cmd.Stdout, cmd.Stderr = out, out
	cmd.SysProcAttr = sysProcAttr()
	if err := cmd.Start(); err != nil {
		_ = out.Close()
		t.Fatalf("start %s: %v", s.name, err)
	}
	done := make(chan struct{})
	s.cmd, s.done, s.exitErr = cmd, done, nil
	s.running, s.paused, s.expected = true, false, expectExit
	s.runStart = offset
	go func() {
		err := cmd.Wait()
		_ = out.Close()
		s.mu.Lock()
		s.exitErr, s.running, s.paused = err, false, false
		expected := s.expected
		s.mu.Unlock()
		if !expected {
			s.c.noteCrash(s, err)
		}
		close(done)
	}()
}

// waitStarted waits until the current process has written its info file,
// and checks the file against what the harness asked for.
func (s *Server) waitStarted() {
	t := s.c.t
	t.Helper()
	s.mu.Lock()
	done := s.done
	s.mu.Unlock()
	deadline := time.Now().Add(StartTimeout)
	for {
		data, err := os.ReadFile(s.infoFile)
		if err == nil {
			var info server.Info
			if err := json.Unmarshal(data, &info); err != nil {
				t.Fatalf("%s: info file %s: %v", s.name, s.infoFile, err)
			}
			s.checkInfo(info)
			return
		}
		select {
		case <-done:
			s.mu.Lock()
			exitErr := s.exitErr
			s.mu.Unlock()
			t.Fatalf("%s exited before serving (%v)\n%s", s.name, exitErr, s.tail(logTailLines))
		default:
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s wrote no info file within %s\n%s", s.name, StartTimeout, s.tail(logTailLines))
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func (s *Server) checkInfo(info server.Info) {
	t := s.c.t
	t.Helper()
	s.mu.Lock()
	defer s.mu.Unlock()
	switch {
	case s.id == "":
		s.id = info.ServerID // ServerIDFromDataDir, first start
	case info.ServerID != s.id:
		t.Fatalf("%s: info file says server id %q, want %q", s.name, info.ServerID, s.id)
	}
	if raft := s.advertisedRaftAddr(); info.RPCAddr != s.rpcAddr || info.RaftAddr != raft {
		t.Fatalf("%s: info file says rpc %s raft %s, want rpc %s raft %s", s.name, info.RPCAddr, info.RaftAddr, s.rpcAddr, raft)
	}
	s.info = info
}

// advertisedRaftAddr is the raft address the server tells others: its
// listen address unless -raft-advertise says otherwise.
func (s *Server) advertisedRaftAddr() string {
	if i := slices.Index(s.args, "-raft-advertise"); i >= 0 && i+1 < len(s.args) {
		return s.args[i+1]
	}
	return s.raftAddr
}

// LogRecords returns the JSON log records of the current (or last) run, in
// order. Lines that are not JSON objects are skipped.
func (s *Server) LogRecords() []map[string]any {
	s.mu.Lock()
	offset := s.runStart
	s.mu.Unlock()
	data, err := os.ReadFile(s.logFile)
	if err != nil || int64(len(data)) < offset {
		return nil
	}
	var recs []map[string]any
	for _, line := range strings.Split(string(data[offset:]), "\n") {
		if !strings.HasPrefix(line, "{") {
			continue
		}
		var rec map[string]any
		if json.Unmarshal([]byte(line), &rec) == nil {
			recs = append(recs, rec)
		}
	}
	return recs
}

// Logged returns the first record of the current (or last) run whose
// message is msg and whose attributes include every key/value pair of
// attrs (compared as formatted with %v), and whether there is one.
func (s *Server) Logged(msg string, attrs ...string) (map[string]any, bool) {
	for _, rec := range s.LogRecords() {
		if rec["msg"] != msg {
			continue
		}
		ok := true
		for i := 0; i+1 < len(attrs); i += 2 {
			if fmt.Sprint(rec[attrs[i]]) != attrs[i+1] {
				ok = false
				break
			}
		}
		if ok {
			return rec, true
		}
	}
	return nil, false
}

// tail returns the last n lines of the server's log file.
func (s *Server) tail(n int) string {
	data, err := os.ReadFile(s.logFile)
	if err != nil {
		return fmt.Sprintf("(no log: %v)", err)
	}
	lines := strings.Split(strings.TrimRight(string(data), "\n"), "\n")
	head := ""
	if len(lines) > n {
		head = fmt.Sprintf("(%d earlier lines in %s)\n", len(lines)-n, s.logFile)
		lines = lines[len(lines)-n:]
	}
	return fmt.Sprintf("=== %s: last %d lines of %s\n%s%s", s.name, len(lines), filepath.Base(s.logFile), head, strings.Join(lines, "\n"))
}

// childEnv is the test's environment without DROVER_* variables, which
// `drover server` would read as flags.
func childEnv() []string {
	var env []string
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "DROVER_") {
			env = append(env, kv)
		}
	}
	return env
}
