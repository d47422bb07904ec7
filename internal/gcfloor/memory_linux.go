package gcfloor

import (
	"os"
	"strconv"
	"strings"
	"syscall"
)

// AvailableMemory is the memory the process may use: the machine's, or its
// cgroup's limit if that is lower; 0 if neither can be read.
func AvailableMemory() uint64 {
	var total uint64
	var info syscall.Sysinfo_t
	if syscall.Sysinfo(&info) == nil {
		total = uint64(info.Totalram) * uint64(info.Unit)
	}
	// The memory limit of the process's cgroup, under cgroup v2 and v1, as
	// seen from inside a container.
	for _, f := range []string{"/sys/fs/cgroup/memory.max", "/sys/fs/cgroup/memory/memory.limit_in_bytes"} {
		if limit := readLimit(f); limit > 0 && (total == 0 || limit < total) {
			total = limit
		}
	}
	return total
}

// readLimit parses a cgroup memory limit file; "max" or an unreadable file
// is 0 (no limit).
func readLimit(path string) uint64 {
	b, err := os.ReadFile(path)
	if err != nil {
		return 0
	}
	n, err := strconv.ParseUint(strings.TrimSpace(string(b)), 10, 64)
	if err != nil {
		return 0
	}
	return n
}
