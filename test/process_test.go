package test_test

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"google.golang.org/grpc"

	"github.com/droverhq/drover/internal/testserver"
	"github.com/droverhq/drover/server"
)

// droverBin is the drover binary built once for the tests of this package.
var droverBin string

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "drover-test-bin-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	droverBin = filepath.Join(dir, "drover")
	build := exec.Command("go", "build", "-o", droverBin, "github.com/droverhq/drover/cmd/drover")
	build.Stdout, build.Stderr = os.Stderr, os.Stderr
	code := 1
	if err := build.Run(); err != nil {
		fmt.Fprintln(os.Stderr, "build drover:", err)
	} else {
		code = m.Run()
	}
	_ = os.RemoveAll(dir)
	os.Exit(code)
}

// process is a running `drover server` process.
type process struct {
	cmd  *exec.Cmd
	info server.Info
	conn *grpc.ClientConn
	done chan error
	log  string
}

// startProcess runs `drover server` with args plus an info file, waits until
// it reports healthy, and kills it when the test ends if it still runs.
func startProcess(t *testing.T, args ...string) *process {
	t.Helper()
	dir := t.TempDir()
	infoFile := filepath.Join(dir, "info.json")
	logFile := filepath.Join(dir, "server.log")
	out, err := os.Create(logFile)
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(droverBin, append([]string{"server", "-info-file", infoFile, "-log-level", "debug"}, args...)...)
	cmd.Stdout, cmd.Stderr = out, out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	p := &process{cmd: cmd, done: make(chan error, 1), log: logFile}
	go func() {
		p.done <- cmd.Wait()
		_ = out.Close()
	}()
	t.Cleanup(func() {
		if p.conn != nil {
			_ = p.conn.Close()
		}
		if cmd.ProcessState == nil {
			_ = cmd.Process.Kill()
			<-p.done
		}
	})
	p.info = waitInfo(t, p, infoFile)
	p.conn = testserver.Dial(t, p.info.RPCAddr)
	testserver.WaitServing(t, p.conn)
	return p
}

// waitInfo waits for the server to write its info file, or to exit.
func waitInfo(t *testing.T, p *process, path string) server.Info {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		data, err := os.ReadFile(path)
		if err == nil {
			var info server.Info
			if err := json.Unmarshal(data, &info); err != nil {
				t.Fatalf("info file: %v", err)
			}
			return info
		}
		select {
		case err := <-p.done:
			p.done <- err
			t.Fatalf("server exited before serving: %v\n%s", err, readLog(p))
		default:
		}
		if time.Now().After(deadline) {
			t.Fatalf("server wrote no info file within 30s\n%s", readLog(p))
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// stop sends sig and waits for the process to exit; it fails the test
// unless the exit is clean.
func (p *process) stop(t *testing.T, sig syscall.Signal) {
	t.Helper()
	if p.conn != nil {
		_ = p.conn.Close()
		p.conn = nil
	}
	if err := p.cmd.Process.Signal(sig); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-p.done:
		if err != nil {
			t.Fatalf("server exited with %v after %s\n%s", err, sig, readLog(p))
		}
	case <-time.After(30 * time.Second):
		t.Fatalf("server did not exit within 30s of %s\n%s", sig, readLog(p))
	}
}

func readLog(p *process) string {
	data, _ := os.ReadFile(p.log)
	return string(data)
}

func testContext(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	t.Cleanup(cancel)
	return ctx
}
