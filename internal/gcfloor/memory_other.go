//go:build !linux

package gcfloor

// AvailableMemory is 0 (unknown) outside Linux: the floor is then capped
// only by GOMEMLIMIT.
func AvailableMemory() uint64 { return 0 }
