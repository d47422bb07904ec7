//go:build !linux

package raftnode

// freeSpace cannot measure free space here; the reserve is not enforced,
// and only writes that fail with ENOSPC are reported as a full data dir.
func freeSpace(string) (uint64, bool, error) { return 0, false, nil }
