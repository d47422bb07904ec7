package server

import (
	"context"
	"fmt"
	"time"

	"google.golang.org/grpc"

	"github.com/droverhq/drover/fsm/state"
	droverv1 "github.com/droverhq/drover/proto/drover/v1"
	"github.com/droverhq/drover/rpc"
	"github.com/droverhq/drover/scheduler"
	"github.com/droverhq/drover/server/jobplan"
	"github.com/droverhq/drover/worker"
)

// workerPool runs this server's scheduler workers. They reach the leader's
// broker and plan queue through this server's own gRPC endpoint, which
// forwards to the leader: one path for leader and followers alike.
type workerPool struct {
	s    *Server
	conn *grpc.ClientConn
	pool *worker.Pool
}

func newWorkerPool(s *Server) (*workerPool, error) {
	conn, err := grpc.NewClient(s.rpcAddr,
		grpc.WithTransportCredentials(s.security.dial), // with TLS, the server certificate: the scheduler service is server-only
		grpc.WithDefaultCallOptions(grpc.ForceCodecV2(rpc.Codec{})))
	if err != nil {
		return nil, fmt.Errorf("dial own gRPC endpoint %s for scheduler workers: %w", s.rpcAddr, err)
	}
	client := schedulerClient{c: droverv1.NewSchedulerServiceClient(conn), serverID: s.id}
	cfg := s.cfg.Scheduler
	schedCfg := s.schedulerConfig()
	newScheduler := func(typ droverv1.JobType, st scheduler.State, p scheduler.Planner) (scheduler.Scheduler, error) {
		return scheduler.New(typ, st, p, schedCfg)
	}
	pool := worker.NewPool(worker.Config{
		NumWorkers: cfg.NumWorkers,
		Schedulers: cfg.Schedulers,
		Logger:     s.logger.With("component", "worker"),
		ServerID:   s.id,
		Observer:   s.instr.workers,
	}, client, client, localState{s.state}, newScheduler)
	if cfg.NumWorkers == 0 {
		// The pool reads zero as "one per CPU"; here it means none.
		if err := pool.SetConfig(0, cfg.Schedulers); err != nil {
			_ = conn.Close()
			return nil, fmt.Errorf("scheduler workers: %w", err)
		}
	}
	return &workerPool{s: s, conn: conn, pool: pool}, nil
}

func (w *workerPool) start(ctx context.Context) { w.pool.Start(ctx) }

// stop ends every worker, then closes the connection they used.
func (w *workerPool) stop() {
	w.pool.Stop()
	_ = w.conn.Close()
}

func (w *workerPool) describe() *droverv1.SchedulerWorkersResponse {
	num, types, paused := w.pool.Config()
	out := &droverv1.SchedulerWorkersResponse{ServerId: w.s.id, NumWorkers: int32(num), EnabledSchedulers: types, Paused: paused}
	for _, wi := range w.pool.Workers() {
		out.Workers = append(out.Workers, &droverv1.SchedulerWorker{
			Id: wi.ID, Status: string(wi.Status), EvalId: wi.EvalID, JobId: wi.JobID,
			StartedAt: wi.Started.UnixNano(), EvalsAcked: wi.Processed, EvalsNacked: wi.Nacked,
		})
	}
	return out
}

func (w *workerPool) update(req *droverv1.UpdateSchedulerWorkersRequest) (*droverv1.SchedulerWorkersResponse, error) {
	num, types, _ := w.pool.Config()
	if req.NumWorkers != nil {
		num = int(req.GetNumWorkers())
	}
	if len(req.GetEnabledSchedulers()) > 0 {
		types = req.GetEnabledSchedulers()
	}
	if err := w.pool.SetConfig(num, types); err != nil {
		return nil, fmt.Errorf("%w: %w", rpc.ErrFailedPrecondition, err)
	}
	if req.Paused != nil {
		if req.GetPaused() {
			w.pool.Pause()
		} else {
			w.pool.Resume()
		}
	}
	return w.describe(), nil
}

// schedulerConfig is how this server's schedulers are configured, for the
// workers and for job plans alike, so that a plan decides as they would.
func (s *Server) schedulerConfig() scheduler.Config {
	return scheduler.Config{
		AllocCIDR: s.cfg.Scheduler.AllocCIDR,
		Logger:    s.logger.With("component", "scheduler"),
		// Deployments ride in plan results that every server applies: a
		// rollout starts only once every server knows them.
		Deployments:         func() bool { return s.gate.check(droverv1.MessageTypeDeploymentStatus) == nil },
		PlacementAlternates: placementAlternates,
		UsageCache:          s.usage,
	}
}

// placementAlternates is how many other ranked nodes each new placement
// names for the plan applier. In c1m (100 jobs of 1,000 at once on 5,000
// nodes) four left 51 of 236 plans partly rejected, eight 2 to 5 of about
// 180, and sixteen none in three runs, at no measurable cost in server
// CPU. Each adds about 5 bytes per placement to the plan, which is not
// stored.
const placementAlternates = 16

// jobPlanner answers JobService.Plan from this server's state.
type jobPlanner struct{ s *Server }

// PlanJob runs the scheduler for job against a snapshot of the state.
func (p jobPlanner) PlanJob(ctx context.Context, job *droverv1.Job) (*droverv1.PlanJobResponse, error) {
	return jobplan.Plan(ctx, p.s.state.Snapshot(), p.s.schedulerConfig(), job, time.Now().UnixNano())
}

// localState is the state store as workers see it.
type localState struct{ st *state.StateStore }

func (l localState) LatestIndex() uint64 { return l.st.LatestIndex() }

func (l localState) SnapshotMinIndex(ctx context.Context, index uint64) (scheduler.State, error) {
	snap, err := l.st.SnapshotMinIndex(ctx, index)
	if err != nil {
		return nil, err
	}
	return snap, nil
}

// schedulerClient is the leader's scheduler service as workers call it.
type schedulerClient struct {
	c        droverv1.SchedulerServiceClient
	serverID string
}

// Dequeue asks for an evaluation; the call waits up to timeout on the
// leader, plus a margin for the trip.
func (c schedulerClient) Dequeue(ctx context.Context, types []droverv1.JobType, timeout time.Duration) (*droverv1.Evaluation, string, uint64, error) {
	ctx, cancel := context.WithTimeout(ctx, timeout+5*time.Second)
	defer cancel()
	resp, err := c.c.Dequeue(ctx, &droverv1.DequeueRequest{Schedulers: types, Timeout: int64(timeout), ServerId: c.serverID})
	if err != nil {
		return nil, "", 0, err
	}
	return resp.GetEval(), resp.GetToken(), resp.GetWaitIndex(), nil
}

func (c schedulerClient) Ack(ctx context.Context, evalID, token string) error {
	_, err := c.c.Ack(ctx, &droverv1.EvalTokenRequest{EvalId: evalID, Token: token})
	return err
}

func (c schedulerClient) Nack(ctx context.Context, evalID, token string) error {
	_, err := c.c.Nack(ctx, &droverv1.EvalTokenRequest{EvalId: evalID, Token: token})
	return err
}

func (c schedulerClient) SubmitPlan(ctx context.Context, p *droverv1.Plan) (*droverv1.PlanResult, error) {
	// The worker asks only whether something was committed.
	resp, err := c.c.SubmitPlan(ctx, &droverv1.SubmitPlanRequest{Plan: p, OmitNodePlans: true})
	if err != nil {
		return nil, err
	}
	return resp.GetResult(), nil
}

func (c schedulerClient) UpdateEval(ctx context.Context, ev *droverv1.Evaluation, token string) error {
	_, err := c.c.UpdateEval(ctx, &droverv1.EvalWriteRequest{Eval: ev, Token: token})
	return err
}

func (c schedulerClient) CreateEval(ctx context.Context, ev *droverv1.Evaluation, token string) error {
	_, err := c.c.CreateEval(ctx, &droverv1.EvalWriteRequest{Eval: ev, Token: token})
	return err
}

func (c schedulerClient) ReblockEval(ctx context.Context, ev *droverv1.Evaluation, token string) error {
	_, err := c.c.ReblockEval(ctx, &droverv1.EvalWriteRequest{Eval: ev, Token: token})
	return err
}
