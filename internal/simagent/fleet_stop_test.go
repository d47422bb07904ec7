package simagent

import (
	"context"
	"testing"
	"testing/synctest"
)

// TestFleetStopWaitsForPollsStartedByRejoins checks that Stop does not
// return while a poll runs that a rejoin started after Stop began: a
// returning agent's registration starts its GetAllocs loop from a rejoin
// goroutine, not from a task.
func TestFleetStopWaitsForPollsStartedByRejoins(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := stoppableFleet()
		rejoinGate, pollGate := make(chan struct{}), make(chan struct{})
		pollDone := make(chan struct{})
		f.rejoins.Go(func() {
			<-rejoinGate
			// What rejoinRegister does through startPolling.
			f.polls.Go(func() {
				defer close(pollDone)
				<-pollGate
			})
		})

		stopped := make(chan struct{})
		go func() {
			defer close(stopped)
			f.Stop()
		}()
		synctest.Wait() // Stop is waiting for the rejoin
		close(rejoinGate)
		synctest.Wait() // the rejoin has started its poll, which waits

		select {
		case <-stopped:
			close(pollGate) // let the poll end with the bubble
			t.Fatal("Stop returned while a poll started by a rejoin was still running")
		default:
		}
		close(pollGate)
		<-stopped
		select {
		case <-pollDone:
		default:
			t.Fatal("Stop returned before the poll")
		}
	})
}

// stoppableFleet is a started fleet without agents or connections whose
// schedule loop has already returned.
func stoppableFleet() *Fleet {
	ctx, cancel := context.WithCancel(context.Background())
	f := &Fleet{
		pool:     &pool{},
		ctx:      ctx,
		cancel:   cancel,
		started:  true,
		loopDone: make(chan struct{}),
	}
	close(f.loopDone)
	return f
}
