package server

import (
	"context"
	"sync"
	"time"
)

// leaderShareInterval is how often the leader looks again at whether other
// servers exist to take its share of the scheduling.
const leaderShareInterval = 5 * time.Second

// leaderWorkerShare is the leader duty that parks three quarters of the
// leader's scheduler workers (worker.LeaderPausedWorkers), leaving its CPU
// to the eval broker, the plan applier and raft, as the reference does. A
// server alone in its raft configuration keeps all its workers: there is
// nobody else to schedule.
type leaderWorkerShare struct {
	s      *Server
	wg     sync.WaitGroup
	cancel context.CancelFunc
}

func (ls *leaderWorkerShare) duty() LeaderDuty {
	return LeaderDuty{Name: "leader worker share", Start: ls.start, Stop: ls.stop}
}

func (ls *leaderWorkerShare) start(ctx context.Context) error {
	ctx, ls.cancel = context.WithCancel(ctx)
	ls.wg.Add(1)
	go func() {
		defer ls.wg.Done()
		defer ls.s.workers.pool.SetLeader(false)
		t := time.NewTicker(leaderShareInterval)
		defer t.Stop()
		for {
			ls.s.workers.pool.SetLeader(ls.hasPeers())
			select {
			case <-ctx.Done():
				return
			case <-t.C:
			}
		}
	}()
	return nil
}

func (ls *leaderWorkerShare) stop() {
	if ls.cancel != nil {
		ls.cancel()
	}
	ls.wg.Wait()
}

// hasPeers reports whether the raft configuration names other servers.
func (ls *leaderWorkerShare) hasPeers() bool {
	conf, err := ls.s.configuration()
	return err == nil && len(conf.Servers) > 1
}
