package fsm

import (
	"fmt"
	"iter"
	"strings"

	"google.golang.org/protobuf/proto"

	"github.com/droverhq/drover/fsm/state"
	droverv1 "github.com/droverhq/drover/proto/drover/v1"
)

// stateDiff compares every table of two snapshots, the derived node and job
// allocation sets included, and describes the differences.
func stateDiff(a, b *state.Snapshot) string {
	var out strings.Builder
	diffSeq(&out, "nodes", a.Nodes(), b.Nodes(), (*droverv1.Node).GetId)
	diffSeq(&out, "jobs", a.Jobs(), b.Jobs(), (*droverv1.Job).GetId)
	versionID := func(j *droverv1.Job) string { return fmt.Sprintf("%s@%d", j.GetId(), j.GetVersion()) }
	diffSeq(&out, "job versions", a.AllJobVersions(), b.AllJobVersions(), versionID)
	diffSeq(&out, "evals", a.Evals(), b.Evals(), (*droverv1.Evaluation).GetId)
	diffSeq(&out, "allocs", a.Allocs(), b.Allocs(), (*droverv1.Allocation).GetId)
	diffSeq(&out, "servers", a.Servers(), b.Servers(), (*droverv1.ServerMember).GetId)
	diffSeq(&out, "job requests", a.JobRequestResults(), b.JobRequestResults(), (*droverv1.JobRequestResult).GetRequestId)
	diffSeq(&out, "ACL policies", a.ACLPolicies(), b.ACLPolicies(), (*droverv1.ACLPolicy).GetName)
	diffSeq(&out, "ACL tokens", a.ACLTokens(), b.ACLTokens(), (*droverv1.ACLToken).GetAccessorId)
	if ab, bb := a.ACLBootstrap(), b.ACLBootstrap(); !proto.Equal(ab, bb) {
		fmt.Fprintf(&out, "ACL bootstrap: %v != %v\n", ab, bb)
	}
	blockKey := func(r *droverv1.IPBlockReleases) string { return fmt.Sprintf("%x", r.GetBlock()) }
	diffSeq(&out, "ip releases", a.IPBlockReleases(), b.IPBlockReleases(), blockKey)
	if x, y := releaseOrder(a), releaseOrder(b); x != y {
		fmt.Fprintf(&out, "released addresses: %s != %s\n", x, y)
	}
	if am, bm := a.ClusterMetadata(), b.ClusterMetadata(); !proto.Equal(am, bm) {
		fmt.Fprintf(&out, "cluster metadata: %v != %v\n", am, bm)
	}
	ai, bi := map[string]uint64{}, map[string]uint64{}
	for t, i := range a.TableIndexes() {
		ai[t] = i
	}
	for t, i := range b.TableIndexes() {
		bi[t] = i
	}
	if fmt.Sprint(ai) != fmt.Sprint(bi) {
		fmt.Fprintf(&out, "table indexes: %v != %v\n", ai, bi)
	}
	for n := range a.Nodes() {
		x, _ := a.AllocsByNode(n.GetId())
		y, _ := b.AllocsByNode(n.GetId())
		if ids(x) != ids(y) {
			fmt.Fprintf(&out, "allocs of node %s: %s != %s\n", n.GetId(), ids(x), ids(y))
		}
	}
	for j := range a.Jobs() {
		x, _ := a.AllocsByJob(j.GetId())
		y, _ := b.AllocsByJob(j.GetId())
		if ids(x) != ids(y) {
			fmt.Fprintf(&out, "allocs of job %s: %s != %s\n", j.GetId(), ids(x), ids(y))
		}
	}
	return out.String()
}

func diffSeq[T proto.Message](out *strings.Builder, table string, a, b iter.Seq[T], key func(T) string) {
	am, bm := collect(a, key), collect(b, key)
	if len(am) != len(bm) {
		fmt.Fprintf(out, "%s: %d rows != %d rows\n", table, len(am), len(bm))
	}
	for k, x := range am {
		if y, ok := bm[k]; !ok || !proto.Equal(x, y) {
			fmt.Fprintf(out, "%s %s differs\n", table, k)
		}
	}
}

func collect[T any](seq iter.Seq[T], key func(T) string) map[string]T {
	m := map[string]T{}
	for x := range seq {
		m[key(x)] = x
	}
	return m
}

// releaseOrder lists the released addresses in the order they would be
// handed out again.
func releaseOrder(s *state.Snapshot) string {
	var out []string
	next := s.ReleasedIPs()
	for addr, at, ok := next(); ok; addr, at, ok = next() {
		out = append(out, fmt.Sprintf("%s@%d", addr, at))
	}
	return strings.Join(out, ",")
}

func ids(allocs []*droverv1.Allocation) string {
	s := make([]string, len(allocs))
	for i, a := range allocs {
		s[i] = a.GetId()
	}
	return strings.Join(s, ",")
}
