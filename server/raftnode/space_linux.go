package raftnode

import "syscall"

// freeSpace returns the bytes an unprivileged writer may still use on the
// file system holding dir.
func freeSpace(dir string) (uint64, bool, error) {
	var st syscall.Statfs_t
	if err := syscall.Statfs(dir, &st); err != nil {
		return 0, false, err
	}
	return st.Bavail * uint64(st.Bsize), true, nil
}
