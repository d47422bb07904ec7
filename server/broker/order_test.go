package broker

import (
	"context"
	"slices"
	"testing"

	droverv1 "github.com/droverhq/drover/proto/drover/v1"
)

func TestDequeueOrder(t *testing.T) {
	tests := []struct {
		name  string
		evals []*droverv1.Evaluation
		types []droverv1.JobType
		want  []string
	}{
		{
			name: "higher priority first",
			evals: []*droverv1.Evaluation{
				ev("low", "j1", 10, created(1)),
				ev("high", "j2", 90, created(2)),
				ev("mid", "j3", 50, created(3)),
			},
			want: []string{"high", "mid", "low"},
		},
		{
			name: "lower create index first within a priority",
			evals: []*droverv1.Evaluation{
				ev("c3", "j1", 50, created(3)),
				ev("c1", "j2", 50, created(1)),
				ev("c2", "j3", 50, created(2)),
			},
			want: []string{"c1", "c2", "c3"},
		},
		{
			name: "arrival order breaks create index ties",
			evals: []*droverv1.Evaluation{
				ev("first", "j1", 50, created(7)),
				ev("second", "j2", 50, created(7)),
				ev("third", "j3", 50, created(7)),
			},
			want: []string{"first", "second", "third"},
		},
		{
			name: "priority across scheduler types",
			evals: []*droverv1.Evaluation{
				ev("svc", "j1", 50, created(1)),
				ev("bat", "j2", 70, created(2), ofType(batch)),
				ev("sys", "j3", 60, created(3), ofType(system)),
			},
			types: []droverv1.JobType{service, batch, system},
			want:  []string{"bat", "sys", "svc"},
		},
		{
			name: "only the requested types",
			evals: []*droverv1.Evaluation{
				ev("svc", "j1", 50, created(1)),
				ev("bat", "j2", 90, created(2), ofType(batch)),
			},
			types: []droverv1.JobType{service},
			want:  []string{"svc"},
		},
		{
			name: "duplicate ids are dropped",
			evals: []*droverv1.Evaluation{
				ev("a", "j1", 50, created(1)),
				ev("a", "j1", 90, created(1)),
				ev("b", "j2", 50, created(2)),
			},
			want: []string{"a", "b"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			b := newBroker(t, fastConfig())
			for _, e := range tt.evals {
				b.Enqueue(e)
			}
			types := tt.types
			if types == nil {
				types = []droverv1.JobType{service}
			}
			var got []string
			for range tt.want {
				e, token := mustDequeue(t, b, types...)
				got = append(got, e.GetId())
				mustAck(t, b, e.GetId(), token)
			}
			if !slices.Equal(got, tt.want) {
				t.Fatalf("order %v, want %v", got, tt.want)
			}
			mustBeEmpty(t, b, types...)
		})
	}
}

func TestDequeueTiesAcrossTypesAreRandom(t *testing.T) {
	b := newBroker(t, fastConfig())
	seen := map[droverv1.JobType]int{}
	for i := range 200 {
		b.Enqueue(ev("s", "js", 50))
		b.Enqueue(ev("b", "jb", 50, ofType(batch)))
		first, tok := mustDequeue(t, b, service, batch)
		second, tok2 := mustDequeue(t, b, service, batch)
		if first.GetType() == second.GetType() {
			t.Fatalf("round %d: both dequeues returned type %v", i, first.GetType())
		}
		seen[first.GetType()]++
		mustAck(t, b, first.GetId(), tok)
		mustAck(t, b, second.GetId(), tok2)
	}
	// Each type wins about half the time; both must win sometimes.
	if seen[service] == 0 || seen[batch] == 0 {
		t.Fatalf("tie winners %v, want both types", seen)
	}
}

func TestDequeueWaitsForEnqueue(t *testing.T) {
	b := newBroker(t, fastConfig())
	type result struct {
		ev  *droverv1.Evaluation
		err error
	}
	done := make(chan result, 1)
	go func() {
		e, _, err := b.Dequeue(context.Background(), []droverv1.JobType{batch, service}, testWait)
		done <- result{e, err}
	}()
	waitFor(t, "dequeue to wait", func() bool { return b.waiterCount() == 1 })
	b.Enqueue(ev("other", "j0", 50, ofType(system))) // not requested
	b.Enqueue(ev("a", "j1", 50))
	r := <-done
	if r.err != nil || r.ev.GetId() != "a" {
		t.Fatalf("dequeue = %v, %v; want a", r.ev.GetId(), r.err)
	}
	if s := b.Stats(); s.Unacked != 1 || s.Ready != 1 {
		t.Fatalf("stats %+v, want 1 unacked, 1 ready", s)
	}
}

func TestDequeueTimeoutAndContext(t *testing.T) {
	b := newBroker(t, fastConfig())

	e, token, err := b.Dequeue(context.Background(), []droverv1.JobType{service}, shortWait)
	if e != nil || token != "" || err != nil {
		t.Fatalf("timeout: got %v %q %v, want nothing", e, token, err)
	}

	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	_, _, err = b.Dequeue(ctx, []droverv1.JobType{service}, testWait)
	wantErr(t, "canceled before", err, context.Canceled)

	ctx, cancel = context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		_, _, err := b.Dequeue(ctx, []droverv1.JobType{service}, 0)
		done <- err
	}()
	waitFor(t, "dequeue to wait", func() bool { return b.waiterCount() == 1 })
	cancel()
	wantErr(t, "canceled while waiting", <-done, context.Canceled)
	if n := b.waiterCount(); n != 0 {
		t.Fatalf("%d waiters left", n)
	}

	_, _, err = b.Dequeue(context.Background(), nil, shortWait)
	if err == nil {
		t.Fatal("dequeue without scheduler types: no error")
	}
}

// A waiter handed an evaluation just as its caller went away gives it
// back without counting the delivery.
func TestAbandonedDeliveryGoesBack(t *testing.T) {
	b := newBroker(t, fastConfig())
	w := &waiter{queues: []queueName{queueName(service)}, ch: make(chan delivery, 1)}
	b.mu.Lock()
	b.waiters = append(b.waiters, w)
	b.mu.Unlock()

	b.Enqueue(ev("a", "j1", 50))
	if s := b.Stats(); s.Unacked != 1 {
		t.Fatalf("after hand-over: %+v, want 1 unacked", s)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, _, err := b.abandon(ctx, w); err == nil {
		t.Fatal("abandon with canceled ctx: no error")
	}
	if s := b.Stats(); s.Unacked != 0 || s.Ready != 1 {
		t.Fatalf("after abandon: %+v, want 1 ready", s)
	}
	mustDequeue(t, b)
	b.mu.Lock()
	deliveries := b.evals["a"].deliveries
	b.mu.Unlock()
	if deliveries != 1 {
		t.Fatalf("deliveries %d, want 1", deliveries)
	}
}
