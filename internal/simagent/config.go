package simagent

import (
	"errors"
	"fmt"
	"log/slog"
	"math"
	"time"

	"google.golang.org/grpc"

	"github.com/droverhq/drover/internal/backoff"
)

// Config is what a Fleet simulates and how it talks to the servers.
type Config struct {
	// Servers are the gRPC addresses agents start from. Addresses the
	// servers announce in their answers are added to these.
	Servers []string
	// DialOptions are added to the fleet's own (rpc.ClientDialOptions,
	// plaintext) and win over them, e.g. TLS credentials.
	DialOptions []grpc.DialOption
	// ConnsPerServer is how many connections the fleet keeps to each server.
	// A server allows a bounded number of calls in flight per connection,
	// and every agent running allocations keeps a GetAllocs call open; zero
	// means one connection in heartbeat-only mode and one per 2,000 nodes
	// otherwise.
	ConnsPerServer int

	// Nodes are the simulated nodes, one agent each.
	Nodes []Node

	// HeartbeatOnly leaves out GetAllocs and running allocations: agents
	// only register and heartbeat, which lets a fleet hold tens of
	// thousands of nodes.
	HeartbeatOnly bool
	// StartDelay is how long an allocation stays pending before the agent
	// reports it running.
	StartDelay time.Duration
	// BatchRunTime is how long a batch allocation runs before the agent
	// reports it complete.
	BatchRunTime time.Duration
	// PollWait is the max_wait of GetAllocs (1m).
	PollWait time.Duration
	// FailureRate is the share (0 to 1) of allocations that fail: a
	// service allocation is reported failed instead of running after
	// StartDelay, a batch one failed instead of complete after
	// BatchRunTime. Which ones fail follows from a hash of the allocation
	// id (see Fails), so a test can predict it.
	FailureRate float64
	// HealthDelay is how long after it starts running an allocation of a
	// deployment is reported healthy (or unhealthy, see UnhealthyMetaKey);
	// zero means its group's update.min_healthy_time, as a real agent.
	HealthDelay time.Duration
	// Faults makes some nodes disconnect and come back now and then.
	Faults Faults

	// HeartbeatMin and HeartbeatMax bound, as fractions of the TTL the
	// servers hand out, when the next heartbeat is sent (0.5 and 0.9), so
	// that the servers' grace period is never needed.
	HeartbeatMin, HeartbeatMax float64
	// SpreadHeartbeats sends each agent's second heartbeat at a random
	// point of its first interval, as in a fleet that has long been running,
	// so that the steady heartbeat rate holds from the start instead of
	// after one TTL (for benchmarks).
	SpreadHeartbeats bool
	// CallTimeout bounds one call; it must exceed the servers' leader hold
	// timeout (5s) so that a call held during an election is not given up
	// early (10s).
	CallTimeout time.Duration
	// RetryMin and RetryMax bound the backoff after a failed call (100ms,
	// 5s). A retry hint from the server is followed, up to RetryMax.
	RetryMin, RetryMax time.Duration
	// MaxInFlight bounds the calls (registrations, heartbeats, reports)
	// the fleet has in flight at once, and so its goroutines (10,000).
	MaxInFlight int

	// Logger receives the fleet's rare log lines: failures that are not
	// retried. Nil discards them.
	Logger *slog.Logger
}

// Defaults of Config.
const (
	DefaultPollWait     = time.Minute
	DefaultCallTimeout  = 10 * time.Second
	DefaultRetryMin     = 100 * time.Millisecond
	DefaultRetryMax     = 5 * time.Second
	DefaultMaxInFlight  = 10000
	defaultHeartbeatMin = 0.5
	defaultHeartbeatMax = 0.9
	// nodesPerConn is how many allocation-running agents share a
	// connection, well under the servers' 4,096 calls per connection.
	nodesPerConn = 2000
)

// withDefaults fills in zero settings.
func (c Config) withDefaults() Config {
	if c.PollWait == 0 {
		c.PollWait = DefaultPollWait
	}
	if c.CallTimeout == 0 {
		c.CallTimeout = DefaultCallTimeout
	}
	if c.RetryMin == 0 {
		c.RetryMin = DefaultRetryMin
	}
	if c.RetryMax == 0 {
		c.RetryMax = DefaultRetryMax
	}
	if c.MaxInFlight == 0 {
		c.MaxInFlight = DefaultMaxInFlight
	}
	if c.HeartbeatMin == 0 && c.HeartbeatMax == 0 {
		c.HeartbeatMin, c.HeartbeatMax = defaultHeartbeatMin, defaultHeartbeatMax
	}
	if c.ConnsPerServer == 0 {
		c.ConnsPerServer = 1
		if !c.HeartbeatOnly {
			c.ConnsPerServer += len(c.Nodes) / nodesPerConn
		}
	}
	if c.Faults.ReorderSpread == 0 {
		c.Faults.ReorderSpread = DefaultReorderSpread
	}
	if c.Logger == nil {
		c.Logger = slog.New(slog.DiscardHandler)
	}
	return c
}

// validate reports every setting that makes no sense.
// retryPolicy paces an agent's retries after failed calls: RetryMin
// doubling up to RetryMax, each spread over ±25% so that agents that failed
// together (a server went away) do not retry together.
func (c Config) retryPolicy() backoff.Policy {
	return backoff.Policy{Initial: c.RetryMin, Max: c.RetryMax, Jitter: 0.25}
}

func (c Config) validate() error {
	var errs []error
	if len(c.Servers) == 0 {
		errs = append(errs, errors.New("simagent: no server addresses"))
	}
	if len(c.Nodes) == 0 {
		errs = append(errs, errors.New("simagent: no nodes"))
	}
	if c.HeartbeatMin <= 0 || c.HeartbeatMax > 1 || c.HeartbeatMin > c.HeartbeatMax {
		errs = append(errs, fmt.Errorf("simagent: heartbeat fractions %g..%g must satisfy 0 < min <= max <= 1",
			c.HeartbeatMin, c.HeartbeatMax))
	}
	if c.RetryMin < 0 || c.RetryMax < c.RetryMin {
		errs = append(errs, fmt.Errorf("simagent: retry backoff %s..%s must satisfy 0 <= min <= max", c.RetryMin, c.RetryMax))
	}
	for _, d := range []struct {
		name string
		v    time.Duration
	}{{"start delay", c.StartDelay}, {"batch run time", c.BatchRunTime}, {"poll wait", c.PollWait}, {"call timeout", c.CallTimeout}} {
		if d.v < 0 {
			errs = append(errs, fmt.Errorf("simagent: %s %s is negative", d.name, d.v))
		}
	}
	if c.HealthDelay < 0 {
		errs = append(errs, fmt.Errorf("simagent: health delay %s must not be negative", c.HealthDelay))
	}
	if c.FailureRate < 0 || c.FailureRate > 1 || math.IsNaN(c.FailureRate) {
		errs = append(errs, fmt.Errorf("simagent: failure rate %g must be between 0 and 1", c.FailureRate))
	}
	if err := c.Faults.validate(); err != nil {
		errs = append(errs, err)
	}
	if c.MaxInFlight < 1 || c.ConnsPerServer < 1 {
		errs = append(errs, fmt.Errorf("simagent: max in flight %d and connections per server %d must be positive",
			c.MaxInFlight, c.ConnsPerServer))
	}
	seen := make(map[string]bool, len(c.Nodes))
	for _, n := range c.Nodes {
		if n.ID == "" || n.Secret == "" {
			errs = append(errs, fmt.Errorf("simagent: node %q has no id or secret", n.Name))
		}
		if seen[n.ID] {
			errs = append(errs, fmt.Errorf("simagent: node id %s given twice", n.ID))
		}
		seen[n.ID] = true
	}
	return errors.Join(errs...)
}
