package cluster

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"syscall"
)

// sysProcAttr kills a server if the test binary dies without cleaning up
// (a go test timeout, a crash), so no server outlives its test.
func sysProcAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
}

// stopped reports whether the process is stopped by a signal (SIGSTOP).
func stopped(pid int) (bool, error) {
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return false, err
	}
	// pid (comm) state ...; comm may contain spaces and parentheses.
	i := bytes.LastIndexByte(data, ')')
	if i < 0 || i+2 >= len(data) {
		return false, fmt.Errorf("unexpected /proc/%d/stat: %q", pid, data)
	}
	return data[i+2] == 'T', nil
}

// errUnobservable is returned by stopped where the state cannot be read
// (never on Linux).
var errUnobservable = errors.New("process state not observable on this system")
