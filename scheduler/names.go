package scheduler

import (
	"strconv"
	"strings"
)

// allocName returns the name of the index-th allocation of a task group,
// "<job>.<group>[<index>]". The index is what scaling works on: scaling up
// fills the lowest free indexes, scaling down stops the highest.
func allocName(jobID, group string, index int) string {
	return jobID + "." + group + "[" + strconv.Itoa(index) + "]"
}

// allocNameIndex returns the index in an allocation name, or false for a
// name that does not end in "[<index>]".
func allocNameIndex(name string) (int, bool) {
	if !strings.HasSuffix(name, "]") {
		return 0, false
	}
	open := strings.LastIndexByte(name, '[')
	if open < 0 {
		return 0, false
	}
	i, err := strconv.Atoi(name[open+1 : len(name)-1])
	if err != nil || i < 0 {
		return 0, false
	}
	return i, true
}

// allocNames tracks which name indexes of one task group are held, so that
// new allocations take the lowest free ones.
type allocNames struct {
	jobID, group string
	used         map[int]struct{}
	// lowest is at or below the lowest free index.
	lowest int
}

func newAllocNames(jobID, group string) *allocNames {
	return &allocNames{jobID: jobID, group: group, used: make(map[int]struct{})}
}

// take marks a name as held. Names without an index hold nothing.
func (n *allocNames) take(name string) {
	if i, ok := allocNameIndex(name); ok {
		n.used[i] = struct{}{}
	}
}

// next takes and returns the k lowest free names.
func (n *allocNames) next(k int) []string {
	names := make([]string, 0, k)
	for len(names) < k {
		if _, held := n.used[n.lowest]; !held {
			n.used[n.lowest] = struct{}{}
			names = append(names, allocName(n.jobID, n.group, n.lowest))
		}
		n.lowest++
	}
	return names
}
