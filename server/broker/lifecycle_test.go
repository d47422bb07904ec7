package broker

import (
	"context"
	"fmt"
	"runtime"
	"sync"
	"testing"
	"time"

	droverv1 "github.com/droverhq/drover/proto/drover/v1"
)

func TestDisableFlushesAndReleasesWaiters(t *testing.T) {
	base := runtime.NumGoroutine()
	cfg := fastConfig()
	cfg.NackTimeout = 20 * time.Millisecond
	cfg.InitialNackDelay = time.Hour
	b := New(cfg, nil)
	if b.Enabled() {
		t.Fatal("new broker is enabled")
	}
	b.Enqueue(ev("ignored", "j0", 50))
	b.SetEnabled(true)
	if s := b.Stats(); s.Ready != 0 {
		t.Fatalf("enqueue while disabled was kept: %+v", s)
	}

	b.Enqueue(ev("out", "j1", 50))
	_, token := mustDequeue(t, b)
	b.Enqueue(ev("pending", "j1", 50))
	b.Enqueue(ev("delayed", "j2", 50, waitUntil(time.Now().Add(time.Hour))))

	waiting := make(chan error, 2)
	for _, types := range [][]droverv1.JobType{{batch}, {system}} {
		go func() {
			_, _, err := b.Dequeue(context.Background(), types, 0)
			waiting <- err
		}()
	}
	failedWaiting := make(chan error, 1)
	go func() {
		_, _, err := b.DequeueFailed(context.Background(), 0)
		failedWaiting <- err
	}()
	waitFor(t, "three waiters", func() bool { return b.waiterCount() == 3 })

	b.SetEnabled(false)
	for range 2 {
		wantErr(t, "waiting dequeue", <-waiting, ErrDisabled)
	}
	wantErr(t, "waiting DequeueFailed", <-failedWaiting, ErrDisabled)
	_, _, err := b.Dequeue(context.Background(), []droverv1.JobType{service}, shortWait)
	wantErr(t, "dequeue while disabled", err, ErrDisabled)
	wantErr(t, "ack after flush", b.Ack("out", token), ErrDisabled)
	if s := b.Stats(); s.Ready+s.Unacked+s.Pending+s.Delayed+s.Failed+s.Cancelable != 0 {
		t.Fatalf("stats after disable %+v, want empty", s)
	}

	// The nack timer of "out" was stopped: re-enabled, nothing comes back.
	b.SetEnabled(true)
	mustBeEmpty(t, b, service, batch, system)
	wantErr(t, "ack after re-enable", b.Ack("out", token), ErrNotFound)
	b.SetEnabled(false)

	// The delay watcher and the waiters are gone.
	waitFor(t, "goroutines to end", func() bool { return runtime.NumGoroutine() <= base })
}

func TestStats(t *testing.T) {
	cfg := fastConfig()
	cfg.DeliveryLimit = 1
	b := newBroker(t, cfg)
	b.Enqueue(ev("s1", "j1", 50))
	b.Enqueue(ev("s2", "j1", 50, modified(2)))
	b.Enqueue(ev("s3", "j1", 50, modified(3)))
	b.Enqueue(ev("s4", "j2", 50))
	b.Enqueue(ev("b1", "j3", 50, ofType(batch)))
	b.Enqueue(ev("b2", "j4", 50, ofType(batch)))
	b.Enqueue(ev("f1", "j5", 50, ofType(system)))
	b.Enqueue(ev("d1", "j6", 50, waitUntil(time.Now().Add(time.Hour))))

	_, s1 := mustDequeue(t, b, service)
	mustDequeue(t, b, batch)
	_, f1 := mustDequeue(t, b, system)
	mustNack(t, b, "f1", f1) // limit 1: straight to the failed queue

	want := Stats{
		Ready: 2, Unacked: 2, Pending: 2, Delayed: 1, Failed: 1,
		ByScheduler: map[droverv1.JobType]SchedulerStats{
			service: {Ready: 1, Unacked: 1},
			batch:   {Ready: 1, Unacked: 1},
		},
	}
	assertStats(t, b.Stats(), want)

	mustAck(t, b, "s1", s1) // s3 ready, s2 cancelable
	want.Pending, want.Cancelable, want.Unacked = 0, 1, 1
	want.Ready = 3
	want.ByScheduler[service] = SchedulerStats{Ready: 2}
	assertStats(t, b.Stats(), want)
}

func assertStats(t *testing.T, got, want Stats) {
	t.Helper()
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("stats\n got %+v\nwant %+v", got, want)
	}
}

// Many workers and producers at once: every eval is delivered, each job
// has at most one eval out at a time, and nothing is lost between a push
// and a waiting dequeuer.
func TestConcurrentWorkers(t *testing.T) {
	b := newBroker(t, fastConfig())
	const (
		jobs        = 20
		evalsPerJob = 25
		workers     = 8
	)
	var (
		mu     sync.Mutex
		out    = map[string]bool{} // job -> an eval of it is held
		acked  = map[string]bool{}
		failed string
	)
	ctx, cancel := context.WithTimeout(context.Background(), testWait)
	defer cancel()
	var wg sync.WaitGroup
	for w := range workers {
		types := []droverv1.JobType{service, batch}
		if w%2 == 0 {
			types = []droverv1.JobType{batch, service}
		}
		wg.Go(func() {
			for {
				e, token, err := b.Dequeue(ctx, types, 0)
				if err != nil {
					return
				}
				mu.Lock()
				if out[e.GetJobId()] && failed == "" {
					failed = "two evals of job " + e.GetJobId() + " out at once"
				}
				out[e.GetJobId()] = true
				acked[e.GetId()] = true
				mu.Unlock()
				runtime.Gosched() // "work" on it, giving a wrong second delivery time to show
				mu.Lock()
				out[e.GetJobId()] = false
				mu.Unlock()
				if err := b.Ack(e.GetId(), token); err != nil {
					mu.Lock()
					failed = err.Error()
					mu.Unlock()
				}
			}
		})
	}
	for j := range jobs {
		wg.Go(func() {
			for i := range evalsPerJob {
				typ := service
				if j%2 == 1 {
					typ = batch
				}
				b.Enqueue(ev(fmt.Sprintf("e-%d-%d", j, i), fmt.Sprintf("job-%d", j), int32(i%3), ofType(typ), modified(uint64(i))))
			}
		})
	}
	// Every eval is either acked or was made cancelable by a newer one.
	canceled := 0
	waitFor(t, "all evals settled", func() bool {
		canceled += len(b.Cancelable(1000))
		mu.Lock()
		defer mu.Unlock()
		return len(acked)+canceled == jobs*evalsPerJob
	})
	cancel()
	wg.Wait()
	if failed != "" {
		t.Fatal(failed)
	}
	if s := b.Stats(); s.Ready+s.Unacked+s.Pending != 0 {
		t.Fatalf("left over: %+v", s)
	}
}
