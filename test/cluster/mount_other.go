//go:build !linux

package cluster

import "fmt"

func mountTmpfs(dir string, size int64) error {
	return fmt.Errorf("%w: tmpfs data dirs need Linux", errNotPermitted)
}

func unmount(dir string) error { return nil }
