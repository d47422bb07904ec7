package rpc_test

import (
	"slices"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/durationpb"

	"github.com/droverhq/drover/fsm/state"
	"github.com/droverhq/drover/internal/mock"
	droverv1 "github.com/droverhq/drover/proto/drover/v1"
)

// jobTables fingerprints the tables job writes touch. Tests compare it
// rather than the raft index to see that a refused write changed nothing,
// since the server writes entries of its own (its servers table record) in
// the background.
func (e *env) jobTables() string {
	d, err := e.srv.State().Snapshot().Digest()
	if err != nil {
		e.t.Fatal(err)
	}
	return d[state.TableJobs] + d[state.TableJobVersions] + d[state.TableEvals] + d[state.TableJobRequests]
}

func TestJobRegisterWritesJobAndEvalTogether(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	j := mock.Job(2)
	j.Priority = 0 // defaulted
	j.TaskGroups[0].ReschedulePolicy = nil
	resp, err := e.jobs.Register(e.ctx(), &droverv1.RegisterJobRequest{Job: j})
	if err != nil {
		t.Fatal(err)
	}
	got, err := e.jobs.Get(e.ctx(), &droverv1.GetJobRequest{JobId: j.GetId()})
	if err != nil {
		t.Fatal(err)
	}
	job := got.GetJob()
	if job.GetPriority() != droverv1.DefaultJobPriority || job.GetTaskGroups()[0].GetReschedulePolicy() == nil || job.GetStatus() != droverv1.JobStatus_JOB_STATUS_PENDING {
		t.Errorf("stored job not canonical: priority %d, policy %v, status %s", job.GetPriority(), job.GetTaskGroups()[0].GetReschedulePolicy(), job.GetStatus())
	}
	ev, err := e.evals.Get(e.ctx(), &droverv1.GetEvaluationRequest{EvalId: resp.GetEvalId()})
	if err != nil {
		t.Fatal(err)
	}
	// One raft entry wrote both.
	if job.GetCreateIndex() != resp.GetIndex() || ev.GetEvaluation().GetCreateIndex() != resp.GetIndex() ||
		ev.GetEvaluation().GetJobModifyIndex() != job.GetJobModifyIndex() ||
		ev.GetEvaluation().GetStatus() != droverv1.EvalStatus_EVAL_STATUS_PENDING {
		t.Errorf("eval %+v: want pending, created with the job", ev.GetEvaluation())
	}

	// A changed specification is a new version with a new evaluation.
	j.TaskGroups[0].Count = 5
	again, err := e.jobs.Register(e.ctx(), &droverv1.RegisterJobRequest{Job: j})
	if err != nil {
		t.Fatal(err)
	}
	if again.GetJobVersion() != 1 || again.GetEvalId() == resp.GetEvalId() {
		t.Errorf("update: version %d eval %s", again.GetJobVersion(), again.GetEvalId())
	}
	evals, err := e.jobs.Evaluations(e.ctx(), &droverv1.ListJobEvaluationsRequest{JobId: j.GetId()})
	if err != nil {
		t.Fatal(err)
	}
	if len(evals.GetEvaluations()) != 2 {
		t.Errorf("job has %d evaluations, want 2", len(evals.GetEvaluations()))
	}
}

func TestJobRegisterRejections(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	tests := []struct {
		name  string
		edit  func(j *droverv1.Job)
		field string
	}{
		{"no id", func(j *droverv1.Job) { j.Id = "" }, "job.id"},
		{"id with spaces", func(j *droverv1.Job) { j.Id = "my job" }, "job.id"},
		{"priority too high", func(j *droverv1.Job) { j.Priority = 101 }, "job.priority"},
		{"unknown type", func(j *droverv1.Job) { j.Type = 9 }, "job.type"},
		{"no datacenters", func(j *droverv1.Job) { j.Datacenters = nil }, "job.datacenters"},
		{"no groups", func(j *droverv1.Job) { j.TaskGroups = nil }, "job.task_groups"},
		{"duplicate group", func(j *droverv1.Job) { j.TaskGroups = append(j.TaskGroups, j.TaskGroups[0].CloneVT()) }, "job.task_groups[1].name"},
		{"negative count", func(j *droverv1.Job) { j.TaskGroups[0].Count = -1 }, "job.task_groups[0].count"},
		{"no resources", func(j *droverv1.Job) { j.TaskGroups[0].Resources = nil }, "job.task_groups[0].resources"},
		{"no memory", func(j *droverv1.Job) { j.TaskGroups[0].Resources.MemoryMb = 0 }, "job.task_groups[0].resources.memory_mb"},
		{"port out of range", func(j *droverv1.Job) { j.TaskGroups[0].Resources.Ports[0].Value = 70000 }, "job.task_groups[0].resources.ports[0].value"},
		{"duplicate port label", func(j *droverv1.Job) {
			j.TaskGroups[0].Resources.Ports = append(j.TaskGroups[0].Resources.Ports, &droverv1.Port{Label: "http"})
		}, "job.task_groups[0].resources.ports[1].label"},
		{"bad regexp", func(j *droverv1.Job) {
			j.Constraints = []*droverv1.Constraint{{Attribute: "kernel.name", Operator: droverv1.ConstraintOperator_CONSTRAINT_OPERATOR_REGEXP, Value: "("}}
		}, "job.constraints[0].value"},
		{"constraint without operator", func(j *droverv1.Job) {
			j.TaskGroups[0].Constraints = []*droverv1.Constraint{{Attribute: "rack", Value: "r1"}}
		}, "job.task_groups[0].constraints[0].operator"},
		{"spread over 100%", func(j *droverv1.Job) {
			j.TaskGroups[0].Spreads = []*droverv1.Spread{{Attribute: "rack", Targets: []*droverv1.SpreadTarget{{Value: "a", Percent: 70}, {Value: "b", Percent: 40}}}}
		}, "job.task_groups[0].spreads[0].targets"},
		{"negative disconnect", func(j *droverv1.Job) { j.TaskGroups[0].MaxClientDisconnect = durationpb.New(-time.Second) }, "job.task_groups[0].max_client_disconnect"},
		// A client built before 0.3 sends nanoseconds in the legacy field:
		// moved to the Duration field, it is checked under its name.
		{"negative legacy disconnect", func(j *droverv1.Job) { j.TaskGroups[0].MaxClientDisconnectNs = -1 }, "job.task_groups[0].max_client_disconnect"},
		{"invalid disconnect", func(j *droverv1.Job) {
			j.TaskGroups[0].MaxClientDisconnect = &durationpb.Duration{Seconds: 1, Nanos: -1}
		}, "job.task_groups[0].max_client_disconnect"},
		{"bad reschedule", func(j *droverv1.Job) {
			j.TaskGroups[0].ReschedulePolicy = &droverv1.ReschedulePolicy{Attempts: 2, DelayFunction: droverv1.DelayFunction_DELAY_FUNCTION_CONSTANT}
		}, "job.task_groups[0].reschedule_policy.interval"},
		{"task without driver", func(j *droverv1.Job) { j.TaskGroups[0].Tasks[0].Driver = "" }, "job.task_groups[0].tasks[0].driver"},
		{"migrate without parallelism", func(j *droverv1.Job) {
			j.TaskGroups[0].Migrate = &droverv1.MigrateStrategy{}
		}, "job.task_groups[0].migrate.max_parallel"},
		{"canary without rollout", func(j *droverv1.Job) {
			j.Update = &droverv1.UpdateStrategy{MaxParallel: proto.Int32(0)}
			j.TaskGroups[0].Update = &droverv1.UpdateStrategy{Canary: proto.Int32(1)}
		}, "job.task_groups[0].update.canary"},
		{"update block on a batch job", func(j *droverv1.Job) {
			j.Type = droverv1.JobType_JOB_TYPE_BATCH
			j.Update = &droverv1.UpdateStrategy{}
		}, "job.update"},
		{"migrate on a batch job", func(j *droverv1.Job) {
			j.Type = droverv1.JobType_JOB_TYPE_BATCH
			j.TaskGroups[0].Migrate = &droverv1.MigrateStrategy{MaxParallel: 1}
		}, "job.task_groups[0].migrate"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			j := mock.Job(1)
			tt.edit(j)
			before := e.jobTables()
			_, err := e.jobs.Register(e.ctx(), &droverv1.RegisterJobRequest{Job: j})
			wantInvalid(t, err, tt.field)
			if e.jobTables() != before {
				t.Errorf("a refused job was written")
			}
		})
	}
}

func TestJobWritesWithRequestIDApplyOnce(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	j := mock.Job(1)
	requestID := mock.ID()
	first, err := e.jobs.Register(e.ctx(), &droverv1.RegisterJobRequest{Job: j.CloneVT(), RequestId: requestID})
	if err != nil {
		t.Fatal(err)
	}
	// A retry, even of another specification, answers as the first did.
	changed := j.CloneVT()
	changed.TaskGroups[0].Count = 3
	retry, err := e.jobs.Register(e.ctx(), &droverv1.RegisterJobRequest{Job: changed, RequestId: requestID})
	if err != nil {
		t.Fatal(err)
	}
	if retry.GetEvalId() != first.GetEvalId() || retry.GetIndex() != first.GetIndex() ||
		retry.GetJobVersion() != first.GetJobVersion() || retry.GetJobModifyIndex() != first.GetJobModifyIndex() {
		t.Errorf("retry answered %v, want the first answer %v", retry, first)
	}
	evals, err := e.jobs.Evaluations(e.ctx(), &droverv1.ListJobEvaluationsRequest{JobId: j.GetId()})
	if err != nil {
		t.Fatal(err)
	}
	if len(evals.GetEvaluations()) != 1 || evals.GetEvaluations()[0].GetId() != first.GetEvalId() {
		t.Errorf("job has evaluations %v, want only %s", evals.GetEvaluations(), first.GetEvalId())
	}
	if got := e.srv.State().Snapshot().JobByID(j.GetId()); got.GetTaskGroups()[0].GetCount() != 1 || got.GetVersion() != 0 {
		t.Errorf("retry changed the job: count %d version %d", got.GetTaskGroups()[0].GetCount(), got.GetVersion())
	}

	stopID := mock.ID()
	stop, err := e.jobs.Deregister(e.ctx(), &droverv1.DeregisterJobRequest{JobId: j.GetId(), RequestId: stopID})
	if err != nil {
		t.Fatal(err)
	}
	stopRetry, err := e.jobs.Deregister(e.ctx(), &droverv1.DeregisterJobRequest{JobId: j.GetId(), RequestId: stopID})
	if err != nil {
		t.Fatal(err)
	}
	if stopRetry.GetEvalId() != stop.GetEvalId() || stopRetry.GetIndex() != stop.GetIndex() {
		t.Errorf("deregister retry answered %v, want the first answer %v", stopRetry, stop)
	}
	if got := e.srv.State().Snapshot().JobByID(j.GetId()); got.GetVersion() != 1 {
		t.Errorf("job version after a replayed stop = %d, want 1", got.GetVersion())
	}
}

func TestJobWritesRejectBadRequestIDs(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	tests := []struct {
		name string
		id   string
	}{
		{"too long", strings.Repeat("a", 129)},
		{"space", "retry 1"},
		{"tab", "retry\t1"},
		{"control character", "retry\x001"},
		{"non-ASCII", "réessai"},
		{"DEL", "retry\x7f"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			before := e.jobTables()
			_, err := e.jobs.Register(e.ctx(), &droverv1.RegisterJobRequest{Job: mock.Job(1), RequestId: tt.id})
			wantInvalid(t, err, "request_id")
			_, err = e.jobs.Deregister(e.ctx(), &droverv1.DeregisterJobRequest{JobId: "web", RequestId: tt.id})
			wantInvalid(t, err, "request_id")
			if e.jobTables() != before {
				t.Errorf("a refused request was written")
			}
		})
	}
	// The longest accepted id, every printable character allowed.
	for _, id := range []string{strings.Repeat("a", 128), "!\"#$%&'()*+,-./09:;<=>?@AZ[\\]^_`az{|}~"} {
		if _, err := e.jobs.Register(e.ctx(), &droverv1.RegisterJobRequest{Job: mock.Job(1), RequestId: id}); err != nil {
			t.Errorf("request id %q refused: %v", id, err)
		}
	}
}

func TestJobDeregister(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	j := e.job(1)
	resp, err := e.jobs.Deregister(e.ctx(), &droverv1.DeregisterJobRequest{JobId: j.GetId()})
	if err != nil {
		t.Fatal(err)
	}
	got, err := e.jobs.Get(e.ctx(), &droverv1.GetJobRequest{JobId: j.GetId()})
	if err != nil {
		t.Fatal(err)
	}
	if !got.GetJob().GetStop() || got.GetJob().GetStatus() != droverv1.JobStatus_JOB_STATUS_DEAD {
		t.Errorf("deregistered job: stop %v status %s", got.GetJob().GetStop(), got.GetJob().GetStatus())
	}
	ev := e.srv.State().Snapshot().EvalByID(resp.GetEvalId())
	if ev.GetTriggeredBy() != droverv1.EvalTrigger_EVAL_TRIGGER_JOB_DEREGISTER || ev.GetCreateIndex() != resp.GetIndex() {
		t.Errorf("deregister eval %+v", ev)
	}
	_, err = e.jobs.Deregister(e.ctx(), &droverv1.DeregisterJobRequest{JobId: "missing"})
	wantCode(t, err, codes.NotFound)
	_, err = e.jobs.Deregister(e.ctx(), &droverv1.DeregisterJobRequest{})
	wantInvalid(t, err, "job_id")
}

func TestReads(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	n := e.register()
	job := e.job(5)
	placed := e.place(n, job, 5)

	t.Run("not found", func(t *testing.T) {
		_, err := e.jobs.Get(e.ctx(), &droverv1.GetJobRequest{JobId: "nope"})
		wantCode(t, err, codes.NotFound)
		_, err = e.allocs.Get(e.ctx(), &droverv1.GetAllocationRequest{AllocId: mock.ID()})
		wantCode(t, err, codes.NotFound)
		_, err = e.evals.Get(e.ctx(), &droverv1.GetEvaluationRequest{EvalId: mock.ID()})
		wantCode(t, err, codes.NotFound)
	})
	t.Run("malformed ids", func(t *testing.T) {
		_, err := e.allocs.Get(e.ctx(), &droverv1.GetAllocationRequest{AllocId: "x"})
		wantInvalid(t, err, "alloc_id")
		_, err = e.evals.Get(e.ctx(), &droverv1.GetEvaluationRequest{EvalId: "x"})
		wantInvalid(t, err, "eval_id")
		_, err = e.allocs.List(e.ctx(), &droverv1.ListAllocationsRequest{Page: &droverv1.PageOptions{PageSize: -1}})
		wantInvalid(t, err, "page.page_size")
	})
	t.Run("alloc get", func(t *testing.T) {
		got, err := e.allocs.Get(e.ctx(), &droverv1.GetAllocationRequest{AllocId: placed[0].GetId()})
		if err != nil {
			t.Fatal(err)
		}
		if got.GetAllocation().GetId() != placed[0].GetId() || got.GetMeta().GetIndex() != placed[0].GetModifyIndex() || !got.GetMeta().GetKnownLeader() {
			t.Errorf("get: %s meta %+v", got.GetAllocation().GetId(), got.GetMeta())
		}
	})
	t.Run("paged lists", func(t *testing.T) {
		var want []string
		for _, a := range placed {
			want = append(want, a.GetId())
		}
		slices.Sort(want)
		var got []string
		page := &droverv1.PageOptions{PageSize: 2}
		for {
			resp, err := e.jobs.Allocations(e.ctx(), &droverv1.ListJobAllocationsRequest{JobId: job.GetId(), Page: page})
			if err != nil {
				t.Fatal(err)
			}
			for _, a := range resp.GetAllocations() {
				got = append(got, a.GetId())
			}
			if resp.GetNextToken() == "" {
				break
			}
			page.NextToken = resp.GetNextToken()
		}
		if !slices.Equal(got, want) {
			t.Errorf("job allocations paged = %v, want %v", got, want)
		}
		all, err := e.allocs.List(e.ctx(), &droverv1.ListAllocationsRequest{})
		if err != nil {
			t.Fatal(err)
		}
		if len(all.GetAllocations()) != 5 {
			t.Errorf("alloc list has %d, want 5", len(all.GetAllocations()))
		}
		jobs, err := e.jobs.List(e.ctx(), &droverv1.ListJobsRequest{Page: &droverv1.PageOptions{Prefix: job.GetId()[:6]}})
		if err != nil {
			t.Fatal(err)
		}
		if len(jobs.GetJobs()) != 1 {
			t.Errorf("jobs with prefix: %d, want 1", len(jobs.GetJobs()))
		}
	})
	t.Run("blocking job read", func(t *testing.T) {
		got, err := e.jobs.Get(e.ctx(), &droverv1.GetJobRequest{JobId: job.GetId()})
		if err != nil {
			t.Fatal(err)
		}
		done := make(chan *droverv1.GetJobResponse, 1)
		go func() {
			resp, err := e.jobs.Get(e.ctx(), &droverv1.GetJobRequest{JobId: job.GetId(),
				Query: &droverv1.QueryOptions{MinIndex: got.GetMeta().GetIndex(), MaxWait: durationpb.New(time.Minute)}})
			if err != nil {
				t.Error(err)
			}
			done <- resp
		}()
		waitBlocked(t, e, 1)
		if _, err := e.jobs.Deregister(e.ctx(), &droverv1.DeregisterJobRequest{JobId: job.GetId()}); err != nil {
			t.Fatal(err)
		}
		if resp := <-done; !resp.GetJob().GetStop() {
			t.Errorf("blocking read woke without the change")
		}
	})
}

func TestEventStream(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	stream, err := e.events.Stream(e.ctx(), &droverv1.StreamEventsRequest{FromIndex: 1, Topics: []droverv1.Topic{droverv1.Topic_TOPIC_NODE}})
	if err != nil {
		t.Fatal(err)
	}
	n := e.register()
	e.job(1) // not a node event: filtered out
	e.heartbeat(n)
	var types []string
	for len(types) < 2 {
		resp, err := stream.Recv()
		if err != nil {
			t.Fatal(err)
		}
		for _, ev := range resp.GetEvents() {
			if ev.GetTopic() != droverv1.Topic_TOPIC_NODE || ev.GetKey() != n.GetId() || ev.GetIndex() != resp.GetIndex() {
				t.Fatalf("unexpected event %s %s %s at %d", ev.GetTopic(), ev.GetType(), ev.GetKey(), ev.GetIndex())
			}
			if ev.GetNode().GetSecretId() != "" {
				t.Fatalf("event carries the node secret")
			}
			types = append(types, ev.GetType())
		}
	}
	if !slices.Equal(types, []string{"NodeRegistered", "NodeStatusUpdated"}) {
		t.Errorf("event types = %v", types)
	}

	bad, err := e.events.Stream(e.ctx(), &droverv1.StreamEventsRequest{Topics: []droverv1.Topic{99}})
	if err == nil {
		_, err = bad.Recv()
	}
	wantInvalid(t, err, "topics[0]")
}
