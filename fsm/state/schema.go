package state

import (
	"github.com/hashicorp/go-memdb"

	droverv1 "github.com/droverhq/drover/proto/drover/v1"
)

// Table names. They also name the rows of the index table.
const (
	TableNodes       = "nodes"
	TableJobs        = "jobs"
	TableJobVersions = "job_versions"
	TableAllocs      = "allocs"
	TableEvals       = "evals"
	TableServers     = "servers"
	// TableJobRequests holds the results of job writes that carried a
	// request id, kept for JobRequestRetention so retries are not applied
	// twice.
	TableJobRequests = "job_requests"
	// TableDeployments holds the rollouts of job versions.
	TableDeployments = "deployments"
	// TableACLPolicies, TableACLTokens and TableACLBootstrap (at most one
	// row) hold access control.
	TableACLPolicies  = "acl_policies"
	TableACLTokens    = "acl_tokens"
	TableACLBootstrap = "acl_bootstrap"
	// TableClusterMeta holds at most one row: the cluster's metadata.
	TableClusterMeta = "cluster_meta"
	TableIndex       = "index"

	// Derived tables, rebuilt from the allocations on restore and never
	// written to snapshots: the allocations of each node and each job.
	// tableNodeSetTree holds one row: the nodes' sets (nodesettree.go).
	tableNodeSetTree = "node_set_tree"
	// tableAllocTree holds one row: the allocations by id (alloctree.go).
	// TableAllocs names them in the index table and in changes.
	tableAllocTree = "alloc_tree"
	tableJobAllocs = "job_allocs"
	// tableNodeAllocMarks is derived from the node sets: one row per node
	// that has a set, written when the set is created, so that an agent's
	// GetAllocs on a node without allocations can wait for its first.
	// Once the set exists, GetAllocs waits on the set's own channel, which
	// closes only when the set's index moves (a server-side change or a
	// membership change), never for the agent's own reports.
	tableNodeAllocMarks = "node_alloc_marks"
	// tableIPBlocks is one row per block of 256 allocation addresses: which
	// are held (derived, rebuilt from the allocations) and when the free
	// ones were last released (kept in snapshots; see ipblocks.go).
	tableIPBlocks = "ip_blocks"
	// tableIPSpans is derived from ip_blocks: which blocks of each span of
	// 256 blocks have no never-used address left.
	tableIPSpans = "ip_spans"
)

// Index names.
const (
	indexID        = "id"
	indexJob       = "job"
	indexAppliedAt = "applied_at"
	indexType      = "type"
	indexDraining  = "draining"
	indexReleased  = "released"
	// indexSecret finds a token by the SHA-256 of its secret.
	indexSecret = "secret"
)

// jobVersion wraps a job stored as one of its versions. The wrapper keeps
// the version table's rows distinct from the job table's in change tracking.
type jobVersion struct {
	job *droverv1.Job
}

// tableIndex is a row of the index table: the raft index of the last write
// to one table.
type tableIndex struct {
	table string
	index uint64
}

// schema is the go-memdb schema of the state store.
//
// Allocations have no memdb index: every memdb index entry costs about 450
// bytes, more than the allocation itself. By id they are kept in the B-tree
// of the alloc_tree table (alloctree.go); by node and by job in derived
// sets, one per node or job holding its allocations sorted by id
// (allocsets.go): the nodes' in the B-tree of the node_set_tree table
// (nodesettree.go), the jobs' as the rows of job_allocs; by evaluation
// through the evaluation's job.
func schema() *memdb.DBSchema {
	return &memdb.DBSchema{Tables: map[string]*memdb.TableSchema{
		TableNodes: {
			Name: TableNodes,
			Indexes: map[string]*memdb.IndexSchema{
				indexID: {Name: indexID, Unique: true, Indexer: uuidIndex[*droverv1.Node]{get: (*droverv1.Node).GetId}},
				// The drainer reads the draining nodes every second.
				indexDraining: {Name: indexDraining, AllowMissing: true, Indexer: flagIndex[*droverv1.Node]{
					has: func(n *droverv1.Node) bool { return n.GetDrainStrategy() != nil },
				}},
			},
		},
		TableJobs: {
			Name: TableJobs,
			Indexes: map[string]*memdb.IndexSchema{
				indexID: {Name: indexID, Unique: true, Indexer: stringIndex[*droverv1.Job]{get: (*droverv1.Job).GetId}},
				// Node changes look up the system jobs, a few among many.
				indexType: {Name: indexType, Indexer: int64Index[*droverv1.Job]{get: func(j *droverv1.Job) int64 { return int64(j.GetType()) }}},
			},
		},
		TableJobVersions: {
			Name: TableJobVersions,
			Indexes: map[string]*memdb.IndexSchema{
				indexID: {Name: indexID, Unique: true, Indexer: versionIndex{}},
			},
		},
		tableAllocTree: {
			Name: tableAllocTree,
			Indexes: map[string]*memdb.IndexSchema{
				indexID: {Name: indexID, Unique: true, Indexer: allocTreeStore.indexer()},
			},
		},
		TableEvals: {
			Name: TableEvals,
			Indexes: map[string]*memdb.IndexSchema{
				indexID:  {Name: indexID, Unique: true, Indexer: uuidIndex[*droverv1.Evaluation]{get: (*droverv1.Evaluation).GetId}},
				indexJob: {Name: indexJob, Indexer: stringIndex[*droverv1.Evaluation]{get: (*droverv1.Evaluation).GetJobId}},
			},
		},
		TableDeployments: {
			Name: TableDeployments,
			Indexes: map[string]*memdb.IndexSchema{
				indexID:  {Name: indexID, Unique: true, Indexer: uuidIndex[*droverv1.Deployment]{get: (*droverv1.Deployment).GetId}},
				indexJob: {Name: indexJob, Indexer: stringIndex[*droverv1.Deployment]{get: (*droverv1.Deployment).GetJobId}},
			},
		},
		TableServers: {
			Name: TableServers,
			Indexes: map[string]*memdb.IndexSchema{
				indexID: {Name: indexID, Unique: true, Indexer: stringIndex[*droverv1.ServerMember]{get: (*droverv1.ServerMember).GetId}},
			},
		},
		TableJobRequests: {
			Name: TableJobRequests,
			Indexes: map[string]*memdb.IndexSchema{
				indexID:        {Name: indexID, Unique: true, Indexer: stringIndex[*droverv1.JobRequestResult]{get: (*droverv1.JobRequestResult).GetRequestId}},
				indexAppliedAt: {Name: indexAppliedAt, Indexer: int64Index[*droverv1.JobRequestResult]{get: (*droverv1.JobRequestResult).GetAppliedAt}},
			},
		},
		TableClusterMeta: {
			Name: TableClusterMeta,
			Indexes: map[string]*memdb.IndexSchema{
				indexID: {Name: indexID, Unique: true, Indexer: stringIndex[*droverv1.ClusterMetadata]{get: clusterMetaKey}},
			},
		},
		TableACLPolicies: {
			Name: TableACLPolicies,
			Indexes: map[string]*memdb.IndexSchema{
				indexID: {Name: indexID, Unique: true, Indexer: stringIndex[*droverv1.ACLPolicy]{get: (*droverv1.ACLPolicy).GetName}},
			},
		},
		TableACLTokens: {
			Name: TableACLTokens,
			Indexes: map[string]*memdb.IndexSchema{
				indexID:     {Name: indexID, Unique: true, Indexer: stringIndex[*droverv1.ACLToken]{get: (*droverv1.ACLToken).GetAccessorId}},
				indexSecret: {Name: indexSecret, Unique: true, Indexer: stringIndex[*droverv1.ACLToken]{get: secretHashKey}},
			},
		},
		TableACLBootstrap: {
			Name: TableACLBootstrap,
			Indexes: map[string]*memdb.IndexSchema{
				indexID: {Name: indexID, Unique: true, Indexer: stringIndex[*droverv1.ACLBootstrapState]{get: aclBootstrapKey}},
			},
		},
		TableIndex: {
			Name: TableIndex,
			Indexes: map[string]*memdb.IndexSchema{
				indexID: {Name: indexID, Unique: true, Indexer: stringIndex[*tableIndex]{get: func(t *tableIndex) string { return t.table }}},
			},
		},
		tableNodeSetTree: {
			Name: tableNodeSetTree,
			Indexes: map[string]*memdb.IndexSchema{
				indexID: {Name: indexID, Unique: true, Indexer: nodeSetTreeStore.indexer()},
			},
		},
		tableNodeAllocMarks: {
			Name: tableNodeAllocMarks,
			Indexes: map[string]*memdb.IndexSchema{
				indexID: {Name: indexID, Unique: true, Indexer: stringIndex[*allocMark]{get: func(m *allocMark) string { return m.key }}},
			},
		},
		tableIPBlocks: {
			Name: tableIPBlocks,
			Indexes: map[string]*memdb.IndexSchema{
				indexID:       {Name: indexID, Unique: true, Indexer: stringIndex[*ipBlock]{get: func(b *ipBlock) string { return b.key }}},
				indexReleased: {Name: indexReleased, Unique: true, AllowMissing: true, Indexer: releasedIndex{}},
			},
		},
		tableIPSpans: {
			Name: tableIPSpans,
			Indexes: map[string]*memdb.IndexSchema{
				indexID: {Name: indexID, Unique: true, Indexer: stringIndex[*ipSpan]{get: func(sp *ipSpan) string { return sp.key }}},
			},
		},
		tableJobAllocs: {
			Name: tableJobAllocs,
			Indexes: map[string]*memdb.IndexSchema{
				indexID: {Name: indexID, Unique: true, Indexer: stringIndex[*allocSet]{get: func(s *allocSet) string { return s.key }}},
			},
		},
	}}
}
