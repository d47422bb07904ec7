//go:build !linux

package cluster

import (
	"errors"
	"syscall"
)

func sysProcAttr() *syscall.SysProcAttr { return nil }

// stopped cannot be observed portably; the harness then relies on signals to
// a child being delivered before kill(2) returns.
func stopped(pid int) (bool, error) { return false, errUnobservable }

var errUnobservable = errors.New("process state not observable on this system")
