package plan

import (
	"context"
	"errors"
	"strconv"
	"testing"

	droverv1 "github.com/droverhq/drover/proto/drover/v1"
)

func TestQueueOrder(t *testing.T) {
	tests := []struct {
		name string
		// priorities of the plans in submission order; plan i has eval id
		// "e<i>".
		priorities []int32
		want       []string
	}{
		{"first come first served", []int32{50, 50, 50}, []string{"e0", "e1", "e2"}},
		{"higher priority first", []int32{10, 90, 50}, []string{"e1", "e2", "e0"}},
		{"equal priorities keep their order", []int32{50, 70, 50, 70, 10}, []string{"e1", "e3", "e0", "e2", "e4"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			q := NewQueue()
			q.SetEnabled(true)
			for i, prio := range tc.priorities {
				if _, err := q.Enqueue(&droverv1.Plan{EvalId: "e" + strconv.Itoa(i), Priority: prio}); err != nil {
					t.Fatal(err)
				}
			}
			if got := q.Stats().Depth; got != len(tc.priorities) {
				t.Errorf("depth %d, want %d", got, len(tc.priorities))
			}
			ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
			defer cancel()
			for _, want := range tc.want {
				p, err := q.dequeue(ctx)
				if err != nil {
					t.Fatal(err)
				}
				if p.plan.GetEvalId() != want {
					t.Fatalf("dequeued %s, want %s", p.plan.GetEvalId(), want)
				}
			}
			if got := q.Stats().Depth; got != 0 {
				t.Errorf("depth %d after draining, want 0", got)
			}
		})
	}
}

func TestQueueDisabled(t *testing.T) {
	q := NewQueue()
	if _, err := q.Enqueue(&droverv1.Plan{EvalId: "e"}); !errors.Is(err, ErrDisabled) {
		t.Fatalf("enqueue on a new queue: %v, want ErrDisabled", err)
	}
	if _, err := q.Enqueue(nil); err == nil {
		t.Fatal("enqueue of nil plan succeeded")
	}
	q.SetEnabled(true)
	var futures []*Future
	for _, id := range []string{"a", "b"} {
		f, err := q.Enqueue(&droverv1.Plan{EvalId: id})
		if err != nil {
			t.Fatal(err)
		}
		futures = append(futures, f)
	}
	q.SetEnabled(false)
	for _, f := range futures {
		res, err := result(t, f)
		if !errors.Is(err, ErrDisabled) || res != nil {
			t.Errorf("waiting plan after disable: %v, %v; want ErrDisabled", res, err)
		}
		if err != nil && err.Error() == ErrDisabled.Error() {
			t.Errorf("error %q does not name the eval", err)
		}
	}
	if d := q.Stats().Depth; d != 0 {
		t.Errorf("depth %d after disable, want 0", d)
	}
	if _, err := q.Enqueue(&droverv1.Plan{EvalId: "c"}); !errors.Is(err, ErrDisabled) || err.Error() == "" {
		t.Errorf("enqueue after disable: %v, want ErrDisabled", err)
	}
	if ErrDisabled.Error() != "plan queue is disabled" {
		t.Errorf("ErrDisabled says %q", ErrDisabled)
	}
}

func TestQueueDequeueWaits(t *testing.T) {
	q := NewQueue()
	q.SetEnabled(true)
	got := make(chan string, 1)
	ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
	defer cancel()
	go func() {
		p, err := q.dequeue(ctx)
		if err != nil {
			got <- err.Error()
			return
		}
		got <- p.plan.GetEvalId()
	}()
	if _, err := q.Enqueue(&droverv1.Plan{EvalId: "late"}); err != nil {
		t.Fatal(err)
	}
	if id := receive(t, got, "dequeue"); id != "late" {
		t.Fatalf("dequeued %q, want late", id)
	}

	stopped, stop := context.WithCancel(context.Background())
	stop()
	if _, err := q.dequeue(stopped); !errors.Is(err, context.Canceled) {
		t.Fatalf("dequeue on an ended context: %v", err)
	}
}

func TestFutureWaitEndsWithContext(t *testing.T) {
	q := NewQueue()
	q.SetEnabled(true)
	f, err := q.Enqueue(&droverv1.Plan{EvalId: "e"})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := f.Wait(ctx); !errors.Is(err, context.Canceled) {
		t.Fatalf("wait on an ended context: %v", err)
	}
	if d := q.Stats().Depth; d != 1 {
		t.Errorf("depth %d, want the plan still queued", d)
	}
}
