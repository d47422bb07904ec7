package broker

import (
	"context"
	"errors"
	"testing"
	"time"

	droverv1 "github.com/droverhq/drover/proto/drover/v1"
)

const (
	service = droverv1.JobType_JOB_TYPE_SERVICE
	batch   = droverv1.JobType_JOB_TYPE_BATCH
	system  = droverv1.JobType_JOB_TYPE_SYSTEM
)

// testWait bounds every wait in these tests.
const testWait = 5 * time.Second

// shortWait is how long a test waits to see that nothing arrives.
const shortWait = 50 * time.Millisecond

// fastConfig keeps redelivery out of the way unless a test asks for it.
func fastConfig() Config {
	return Config{NackTimeout: time.Minute, DeliveryLimit: 3}
}

// newBroker returns an enabled broker that is disabled when the test ends.
func newBroker(t *testing.T, cfg Config) *Broker {
	t.Helper()
	b := New(cfg, nil)
	b.SetEnabled(true)
	t.Cleanup(func() { b.SetEnabled(false) })
	return b
}

// ev builds an evaluation. Options adjust it before it is handed over;
// the broker itself never changes it.
func ev(id, job string, priority int32, opts ...func(*droverv1.Evaluation)) *droverv1.Evaluation {
	e := &droverv1.Evaluation{Id: id, JobId: job, Priority: priority, Type: service, Status: droverv1.EvalStatus_EVAL_STATUS_PENDING}
	for _, o := range opts {
		o(e)
	}
	return e
}

func ofType(t droverv1.JobType) func(*droverv1.Evaluation) {
	return func(e *droverv1.Evaluation) { e.Type = t }
}

func created(i uint64) func(*droverv1.Evaluation) {
	return func(e *droverv1.Evaluation) { e.CreateIndex = i }
}

func modified(i uint64) func(*droverv1.Evaluation) {
	return func(e *droverv1.Evaluation) { e.ModifyIndex = i }
}

func waitUntil(at time.Time) func(*droverv1.Evaluation) {
	return func(e *droverv1.Evaluation) { e.WaitUntil = at.UnixNano() }
}

// mustDequeue dequeues one evaluation of the given types or fails.
func mustDequeue(t *testing.T, b *Broker, types ...droverv1.JobType) (*droverv1.Evaluation, string) {
	t.Helper()
	if len(types) == 0 {
		types = []droverv1.JobType{service}
	}
	got, token, err := b.Dequeue(context.Background(), types, testWait)
	if err != nil {
		t.Fatalf("dequeue: %v", err)
	}
	if got == nil {
		t.Fatalf("dequeue: nothing within %s", testWait)
	}
	if token == "" {
		t.Fatalf("dequeue %s: empty token", got.GetId())
	}
	return got, token
}

// mustBeEmpty checks that nothing of the given types becomes ready within
// shortWait.
func mustBeEmpty(t *testing.T, b *Broker, types ...droverv1.JobType) {
	t.Helper()
	if len(types) == 0 {
		types = []droverv1.JobType{service}
	}
	got, _, err := b.Dequeue(context.Background(), types, shortWait)
	if err != nil {
		t.Fatalf("dequeue: %v", err)
	}
	if got != nil {
		t.Fatalf("dequeue: got %s, want nothing", got.GetId())
	}
}

func mustAck(t *testing.T, b *Broker, id, token string) {
	t.Helper()
	if err := b.Ack(id, token); err != nil {
		t.Fatalf("ack %s: %v", id, err)
	}
}

func mustNack(t *testing.T, b *Broker, id, token string) {
	t.Helper()
	if err := b.Nack(id, token); err != nil {
		t.Fatalf("nack %s: %v", id, err)
	}
}

// waitFor polls cond until it holds or testWait passes.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(testWait)
	tick := time.NewTicker(time.Millisecond)
	defer tick.Stop()
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		<-tick.C
	}
}

// waiters reports how many Dequeue calls are waiting.
func (b *Broker) waiterCount() int {
	b.mu.Lock()
	defer b.mu.Unlock()
	return len(b.waiters)
}

func wantErr(t *testing.T, what string, got, want error) {
	t.Helper()
	if !errors.Is(got, want) {
		t.Fatalf("%s: error %v, want %v", what, got, want)
	}
}
