package chaos

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"strconv"
	"sync"
	"time"

	"github.com/google/uuid"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	droverv1 "github.com/droverhq/drover/proto/drover/v1"
	"github.com/droverhq/drover/test/cluster"
)

// Timing of the clients' calls. A write is retried on other servers, with
// the same request id, until it is acknowledged or writeDeadline passes; a
// read is tried once.
const (
	attemptTimeout = 2 * time.Second
	writeDeadline  = 45 * time.Second
	retryPause     = 50 * time.Millisecond
	// finalReadTries bounds the attempts of each read after the cluster has
	// healed and converged.
	finalReadTries = 10
)

// valueKey is where a register's value lives: a job's meta entry, a node's
// attribute.
const valueKey = "chaos.value"

// Workload is the clients' side of a chaos run: concurrent clients write
// and read registers on random servers and record what they saw. Some
// registers are jobs (JobService.Register with a request id, read with
// JobService.Get), which every client writes; the others are nodes
// (NodeService.Register, read with NodeService.Get), one per client, which
// only that client writes, as only its agent writes a node: a node
// registration is idempotent by content, not by request id, so a retry that
// lands late may apply again, which is harmless for a single writer. Every
// read is a consistent read.
type Workload struct {
	Cluster *cluster.Cluster
	History *History
	Clients int
	Keys    int // job registers
	Seed    uint64

	nodes []*droverv1.Node // the node registers, by client
	acked sync.Map         // key -> struct{}: registers with an acknowledged write
}

// key names register k of a kind.
func jobKey(k int) string  { return "job/chaos-" + strconv.Itoa(k) }
func nodeKey(k int) string { return "node/" + strconv.Itoa(k) }

// Run runs the clients until ctx ends, then waits for their calls in flight.
func (w *Workload) Run(ctx context.Context) {
	seeds := rand.New(rand.NewPCG(w.Seed, 0x5eed))
	w.nodes = make([]*droverv1.Node, w.Clients)
	for k := range w.nodes {
		w.nodes[k] = chaosNode(seeds, k)
	}
	var wg sync.WaitGroup
	for c := range w.Clients {
		rng := rand.New(rand.NewPCG(seeds.Uint64(), uint64(c)))
		wg.Go(func() { w.client(ctx, c, rng) })
	}
	wg.Wait()
}

// chaosNode is node register k: a fixed id and secret from the seed.
func chaosNode(rng *rand.Rand, k int) *droverv1.Node {
	id := func() string {
		var b [16]byte
		for i := range b {
			b[i] = byte(rng.Uint32())
		}
		u, _ := uuid.FromBytes(b[:])
		u[6] = u[6]&0x0f | 0x40 // version 4
		u[8] = u[8]&0x3f | 0x80 // RFC 4122 variant
		return u.String()
	}
	return &droverv1.Node{
		Id:         id(),
		SecretId:   id(),
		Name:       "chaos-" + strconv.Itoa(k),
		Datacenter: "chaos",
		NodeClass:  "chaos",
		Attributes: map[string]string{"kernel.name": "linux"},
		Resources:  &droverv1.NodeResources{CpuMhz: 1000, MemoryMb: 1024, DiskMb: 1024},
	}
}

// client makes operations until ctx ends.
func (w *Workload) client(ctx context.Context, id int, rng *rand.Rand) {
	for n := 0; ctx.Err() == nil; n++ {
		isJob := rng.IntN(2) == 0
		if rng.IntN(2) == 0 {
			k := id // a client writes only its own node
			if isJob {
				k = rng.IntN(w.Keys)
			}
			w.write(ctx, id, rng, isJob, k, fmt.Sprintf("c%d-%d", id, n))
			continue
		}
		k := rng.IntN(w.Clients)
		if isJob {
			k = rng.IntN(w.Keys)
		}
		w.read(ctx, id, rng, isJob, k)
	}
}

// pick draws the server to call from every server started, running or not
// (a call to a stopped one fails like a network error).
func (w *Workload) pick(rng *rand.Rand) *cluster.Server {
	all := w.Cluster.Servers()
	return all[rng.IntN(len(all))]
}

// write writes value into register k until acknowledged or writeDeadline.
// Every attempt has the same effect (a job write's request id, a node
// registration's idempotence), so the history holds one operation.
func (w *Workload) write(ctx context.Context, client int, rng *rand.Rand, isJob bool, k int, value string) {
	op := Op{Client: client, Kind: Write, Value: value, Call: w.History.Now()}
	requestID := uuid.NewString()
	deadline := time.Now().Add(writeDeadline)
	var err error
	for attempt := 0; ; attempt++ {
		srv := w.pick(rng)
		op.Server = srv.ID()
		actx, cancel := context.WithTimeout(context.WithoutCancel(ctx), attemptTimeout)
		if isJob {
			op.Key = jobKey(k)
			_, err = droverv1.NewJobServiceClient(srv.Conn()).Register(actx, &droverv1.RegisterJobRequest{Job: chaosJob(k, value), RequestId: requestID})
		} else {
			op.Key = nodeKey(k)
			n := w.nodes[k].CloneVT()
			n.Attributes[valueKey] = value
			_, err = droverv1.NewNodeServiceClient(srv.Conn()).Register(actx, &droverv1.RegisterNodeRequest{Node: n})
		}
		cancel()
		if err == nil {
			op.Outcome, op.Return = OK, w.History.Now()
			w.History.Add(op)
			w.acked.Store(op.Key, struct{}{})
			return
		}
		if !retryable(err) {
			// The workload sends only valid requests: anything else is a bug
			// of the servers, recorded so that the run fails.
			op.Outcome, op.Return, op.Note = Unknown, w.History.Now(), "refused: "+err.Error()
			w.History.Add(op)
			return
		}
		if time.Now().After(deadline) || ctx.Err() != nil {
			break
		}
		time.Sleep(retryPause)
	}
	op.Outcome, op.Return, op.Note = Unknown, w.History.Now(), err.Error()
	w.History.Add(op)
}

// retryable reports whether a failed write may be tried again: its outcome
// is unknown, and another server (or the same one later) may take it.
func retryable(err error) bool {
	switch status.Code(err) {
	case codes.Unavailable, codes.DeadlineExceeded, codes.Canceled, codes.ResourceExhausted, codes.Aborted:
		return true
	}
	return errors.Is(err, context.DeadlineExceeded)
}

// read reads register k once; a failed read tells nothing and is dropped.
func (w *Workload) read(ctx context.Context, client int, rng *rand.Rand, isJob bool, k int) {
	srv := w.pick(rng)
	op := Op{Client: client, Kind: Read, Server: srv.ID(), Call: w.History.Now()}
	value, err := readRegister(ctx, srv, isJob, k, w.nodes, &droverv1.QueryOptions{})
	if err != nil {
		return
	}
	if isJob {
		op.Key = jobKey(k)
	} else {
		op.Key = nodeKey(k)
	}
	op.Value, op.Outcome, op.Return = value, OK, w.History.Now()
	w.History.Add(op)
}

// readRegister reads a register's value through srv with the query
// options given; "" when the job or node does not exist.
func readRegister(ctx context.Context, srv *cluster.Server, isJob bool, k int, nodes []*droverv1.Node, q *droverv1.QueryOptions) (string, error) {
	ctx, cancel := context.WithTimeout(ctx, attemptTimeout)
	defer cancel()
	var (
		meta map[string]string
		err  error
	)
	if isJob {
		var resp *droverv1.GetJobResponse
		resp, err = droverv1.NewJobServiceClient(srv.Conn()).Get(ctx, &droverv1.GetJobRequest{JobId: jobID(k), Query: q})
		meta = resp.GetJob().GetMeta()
	} else {
		var resp *droverv1.GetNodeResponse
		resp, err = droverv1.NewNodeServiceClient(srv.Conn()).Get(ctx, &droverv1.GetNodeRequest{NodeId: nodes[k].GetId(), Query: q})
		meta = resp.GetNode().GetAttributes()
	}
	switch status.Code(err) {
	case codes.OK:
		return meta[valueKey], nil
	case codes.NotFound:
		return "", nil
	}
	return "", err
}

func jobID(k int) string { return "chaos-" + strconv.Itoa(k) }

// chaosJob is job register k holding value: no allocations (count 0), so
// the registers cost the schedulers little.
func chaosJob(k int, value string) *droverv1.Job {
	j := &droverv1.Job{
		Id:          jobID(k),
		Type:        droverv1.JobType_JOB_TYPE_SERVICE,
		Datacenters: []string{"chaos"},
		Meta:        map[string]string{valueKey: value},
		TaskGroups: []*droverv1.TaskGroup{{
			Name:      "register",
			Count:     0,
			Resources: &droverv1.Resources{CpuMhz: 10, MemoryMb: 10},
			Tasks:     []*droverv1.Task{{Name: "noop", Driver: "exec", Config: map[string]string{"command": "/bin/true"}}},
		}},
	}
	j.Canonicalize()
	return j
}

// Keys lists every register with an acknowledged write.
func (w *Workload) AckedKeys() []string {
	var keys []string
	w.acked.Range(func(k, _ any) bool {
		keys = append(keys, k.(string))
		return true
	})
	return keys
}

// FinalReads reads every register from every given server, with the query
// options given, and records the answers as operations of client id. It
// returns the reads that failed.
func (w *Workload) FinalReads(ctx context.Context, client int, servers []*cluster.Server, q *droverv1.QueryOptions, note string) []error {
	var errs []error
	for _, srv := range servers {
		for k := range max(w.Keys, w.Clients) {
			for _, isJob := range []bool{true, false} {
				if isJob && k >= w.Keys || !isJob && k >= w.Clients {
					continue
				}
				op := Op{Client: client, Kind: Read, Server: srv.ID(), Call: w.History.Now(), Note: note}
				value, err := readRegister(ctx, srv, isJob, k, w.nodes, q)
				// After a partition heals, TCP may take a few retransmission
				// timeouts to resume a stalled connection: retry a while.
				for tries := 1; err != nil && tries < finalReadTries && ctx.Err() == nil; tries++ {
					time.Sleep(retryPause)
					op.Call = w.History.Now()
					value, err = readRegister(ctx, srv, isJob, k, w.nodes, q)
				}
				if err != nil {
					errs = append(errs, fmt.Errorf("%s read of register %d (job %v) on %s: %w", note, k, isJob, srv, err))
					continue
				}
				op.Key = nodeKey(k)
				if isJob {
					op.Key = jobKey(k)
				}
				op.Value, op.Outcome, op.Return = value, OK, w.History.Now()
				w.History.Add(op)
			}
		}
	}
	return errs
}
