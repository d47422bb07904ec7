// Package loadgen drives a drover cluster the way a fleet of machines and
// its operators would: it starts simulated agents (internal/simagent),
// submits jobs in steps, waits until the cluster has done what each step
// asked, and reports what it cost: placements and evaluations per second,
// agent call latencies, server CPU and memory, raft entries and bytes.
//
// Figures are read back from the servers' state and metrics rather than
// counted on the client side, so a report says what the cluster did.
package loadgen

import (
	"errors"
	"fmt"
	"io"
	"time"

	"google.golang.org/grpc"

	"github.com/droverhq/drover/internal/simagent"
	droverv1 "github.com/droverhq/drover/proto/drover/v1"
)

// DefaultTimeout bounds a run whose Config sets none.
const DefaultTimeout = 30 * time.Minute

// Config is one run of the load driver.
type Config struct {
	// Servers are the gRPC addresses of the cluster's servers.
	Servers []string
	// MetricsURLs are http://host:port/metrics of each server; without
	// them the report has no CPU, memory or raft byte figures.
	MetricsURLs []string
	// DialOptions are added to the driver's and the fleet's connections
	// (e.g. TLS credentials).
	DialOptions []grpc.DialOption
	// Fleet describes the simulated nodes and how their agents behave;
	// Servers and DialOptions are filled in from the fields above.
	Fleet simagent.Config
	// Steps are run in order, each after the previous one reached its goal.
	Steps []Step
	// Timeout bounds the whole run (DefaultTimeout).
	Timeout time.Duration
	// Progress receives one line a second while the run goes on; nil
	// prints nothing.
	Progress io.Writer
}

// Step submits jobs and waits until the cluster reached what it asked.
type Step struct {
	// Name labels the step in progress lines and the report.
	Name string
	// Jobs are registered (created or updated) at the start of the step.
	Jobs []*droverv1.Job
	// Stop are ids of jobs to deregister at the start of the step.
	Stop []string
	// WaitRunning waits until every allocation the step's jobs want is in
	// its goal state: running for service and system jobs, complete for
	// batch jobs, and no allocation the servers want stopped still
	// running. Without it the step waits only until the evaluations of
	// its jobs are done.
	WaitRunning bool
	// Hold keeps the fleet going this long after the goal was reached
	// (for churn and heartbeat load).
	Hold time.Duration
}

// withDefaults fills in zero settings.
func (c Config) withDefaults() Config {
	if c.Timeout == 0 {
		c.Timeout = DefaultTimeout
	}
	c.Fleet.Servers = c.Servers
	c.Fleet.DialOptions = append(append([]grpc.DialOption(nil), c.Fleet.DialOptions...), c.DialOptions...)
	return c
}

// validate reports every setting that makes no sense.
func (c Config) validate() error {
	var errs []error
	if len(c.Servers) == 0 {
		errs = append(errs, errors.New("loadgen: no server addresses"))
	}
	if len(c.MetricsURLs) > 0 && len(c.MetricsURLs) != len(c.Servers) {
		errs = append(errs, fmt.Errorf("loadgen: %d metrics URLs for %d servers", len(c.MetricsURLs), len(c.Servers)))
	}
	if len(c.Fleet.Nodes) == 0 {
		errs = append(errs, errors.New("loadgen: the fleet has no nodes"))
	}
	if c.Timeout < 0 {
		errs = append(errs, fmt.Errorf("loadgen: timeout %s is negative", c.Timeout))
	}
	for i, s := range c.Steps {
		if len(s.Jobs) == 0 && len(s.Stop) == 0 && s.Hold == 0 {
			errs = append(errs, fmt.Errorf("loadgen: step %d (%s) does nothing", i, s.Name))
		}
		for _, j := range s.Jobs {
			if j.GetId() == "" {
				errs = append(errs, fmt.Errorf("loadgen: step %d (%s) has a job without id", i, s.Name))
			}
		}
	}
	return errors.Join(errs...)
}
