package broker

import (
	"slices"
	"testing"

	droverv1 "github.com/droverhq/drover/proto/drover/v1"
)

func TestJobSerialization(t *testing.T) {
	b := newBroker(t, fastConfig())
	b.Enqueue(ev("a1", "job-a", 50, created(1)))
	b.Enqueue(ev("a2", "job-a", 90, created(2)))
	b.Enqueue(ev("b1", "job-b", 10, created(3)))

	first, tok1 := mustDequeue(t, b)
	if first.GetId() != "a1" {
		t.Fatalf("first = %s, want a1 (a2 waits behind it despite its priority)", first.GetId())
	}
	second, tok2 := mustDequeue(t, b)
	if second.GetId() != "b1" {
		t.Fatalf("second = %s, want b1", second.GetId())
	}
	mustBeEmpty(t, b)
	if s := b.Stats(); s.Pending != 1 || s.Unacked != 2 {
		t.Fatalf("stats %+v, want 1 pending, 2 unacked", s)
	}

	mustAck(t, b, "a1", tok1)
	third, tok3 := mustDequeue(t, b)
	if third.GetId() != "a2" {
		t.Fatalf("after ack: %s, want a2", third.GetId())
	}
	mustAck(t, b, "b1", tok2)
	mustAck(t, b, "a2", tok3)
	if s := b.Stats(); s.Pending != 0 || s.Unacked != 0 || s.Cancelable != 0 {
		t.Fatalf("stats %+v, want empty", s)
	}
}

func TestAckPromotesNewestPendingAndCancelsTheRest(t *testing.T) {
	tests := []struct {
		name        string
		pending     []*droverv1.Evaluation
		wantNext    string
		wantCancels []string
	}{
		{
			name:     "single pending eval becomes ready",
			pending:  []*droverv1.Evaluation{ev("p1", "j", 50, modified(5))},
			wantNext: "p1",
		},
		{
			name: "newest modify index wins",
			pending: []*droverv1.Evaluation{
				ev("p5", "j", 50, modified(5)),
				ev("p9", "j", 50, modified(9)),
				ev("p7", "j", 50, modified(7)),
			},
			wantNext:    "p9",
			wantCancels: []string{"p5", "p7"},
		},
		{
			name: "priority beats modify index",
			pending: []*droverv1.Evaluation{
				ev("new", "j", 50, modified(9)),
				ev("urgent", "j", 80, modified(3)),
			},
			wantNext:    "urgent",
			wantCancels: []string{"new"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			b := newBroker(t, fastConfig())
			b.Enqueue(ev("cur", "j", 50, modified(1)))
			_, token := mustDequeue(t, b)
			for _, e := range tt.pending {
				b.Enqueue(e)
			}
			mustAck(t, b, "cur", token)

			next, nextToken := mustDequeue(t, b)
			if next.GetId() != tt.wantNext {
				t.Fatalf("next = %s, want %s", next.GetId(), tt.wantNext)
			}
			var cancels []string
			for _, e := range b.Cancelable(100) {
				cancels = append(cancels, e.GetId())
			}
			slices.Sort(cancels)
			if !slices.Equal(cancels, tt.wantCancels) {
				t.Fatalf("cancelable %v, want %v", cancels, tt.wantCancels)
			}
			mustAck(t, b, next.GetId(), nextToken)
			mustBeEmpty(t, b)
		})
	}
}

func TestCancelableBatches(t *testing.T) {
	b := newBroker(t, fastConfig())
	b.Enqueue(ev("cur", "j", 50, modified(1)))
	_, token := mustDequeue(t, b)
	ids := []string{"c1", "c2", "c3", "c4", "c5", "c6", "c7", "c8"}
	for i, id := range ids {
		b.Enqueue(ev(id, "j", 50, modified(uint64(10+i))))
	}
	mustAck(t, b, "cur", token) // c8 (newest) becomes ready, 7 cancelable

	if s := b.Stats(); s.Cancelable != 7 || s.Pending != 0 || s.Ready != 1 {
		t.Fatalf("stats %+v, want 7 cancelable, 1 ready", s)
	}
	var got []string
	for _, want := range []int{3, 3, 1, 0} {
		batch := b.Cancelable(3)
		if len(batch) != want {
			t.Fatalf("batch of %d, want %d", len(batch), want)
		}
		for _, e := range batch {
			got = append(got, e.GetId())
		}
	}
	slices.Sort(got)
	if !slices.Equal(got, ids[:7]) {
		t.Fatalf("canceled %v, want %v", got, ids[:7])
	}
	if s := b.Stats(); s.Cancelable != 0 {
		t.Fatalf("stats %+v, want none cancelable", s)
	}
	// A collected id is forgotten: it could be enqueued again.
	b.Enqueue(ev("c1", "other", 50))
	if s := b.Stats(); s.Ready != 2 {
		t.Fatalf("stats %+v, want c1 ready again", s)
	}
}

func TestEnqueueAllRequeueOnAck(t *testing.T) {
	tests := []struct {
		name string
		// ack settles the outstanding eval with Ack, else with Nack.
		ack bool
	}{
		{name: "ack enqueues the stashed eval", ack: true},
		{name: "nack drops the stashed eval", ack: false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			b := newBroker(t, fastConfig())
			orig := ev("e", "j", 50)
			b.Enqueue(orig)
			_, token := mustDequeue(t, b)

			// The same eval comes back from the blocked tracker while its
			// worker still holds it.
			again := ev("e", "j", 50, modified(9))
			b.EnqueueAll(map[*droverv1.Evaluation]string{again: token})
			if s := b.Stats(); s.Ready != 0 || s.Pending != 0 {
				t.Fatalf("stashed eval is queued: %+v", s)
			}

			if tt.ack {
				mustAck(t, b, "e", token)
				got, _ := mustDequeue(t, b)
				if got != again {
					t.Fatal("requeued eval is not the one stashed")
				}
				return
			}
			mustNack(t, b, "e", token)
			got, tok := mustDequeue(t, b)
			if got != orig {
				t.Fatal("nacked eval should come back as it was")
			}
			mustAck(t, b, "e", tok)
			mustBeEmpty(t, b)
		})
	}
}

func TestEnqueueAllWithoutMatchingToken(t *testing.T) {
	b := newBroker(t, fastConfig())
	b.Enqueue(ev("held", "j1", 50))
	_, token := mustDequeue(t, b)

	b.EnqueueAll(map[*droverv1.Evaluation]string{
		ev("held", "j1", 50):  "some-other-token", // known, not under this token: dropped
		ev("fresh", "j2", 50): "stale-token",      // unknown: enqueued normally
		ev("plain", "j3", 50): "",
	})
	mustAck(t, b, "held", token)
	var got []string
	for range 2 {
		e, tok := mustDequeue(t, b)
		got = append(got, e.GetId())
		mustAck(t, b, e.GetId(), tok)
	}
	slices.Sort(got)
	if !slices.Equal(got, []string{"fresh", "plain"}) {
		t.Fatalf("dequeued %v, want fresh and plain", got)
	}
	mustBeEmpty(t, b)
}
