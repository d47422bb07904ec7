package cli

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"math"
	"os"
	"runtime/pprof"
	"strings"
	"time"

	"github.com/peterbourgon/ff/v3/ffcli"

	"github.com/droverhq/drover/internal/gcfloor"
	"github.com/droverhq/drover/internal/loadgen"
)

// benchPreset returns the load driver's preset of a -scenario name.
func benchPreset(name string) (func(scale float64) loadgen.Config, bool) {
	switch name {
	case "c1m":
		return loadgen.C1MSmall, true
	case "churn":
		return loadgen.Churn, true
	case "scale":
		return loadgen.ScaleUpDown, true
	case "concurrent":
		return loadgen.Concurrent, true
	case "c1m-full":
		return loadgen.C1MFull, true
	case "heartbeats":
		return func(scale float64) loadgen.Config { return loadgen.Heartbeats(max(1, int(math.Round(50000*scale)))) }, true
	}
	return nil, false
}

// benchFlags are the flags of drover bench.
type benchFlags struct {
	servers  string
	metrics  string
	scenario string
	scale    float64
	timeout  time.Duration
	json     bool
	// cpuProfile is a file for the load driver's own CPU profile: the
	// simulated fleet shares the machine with the servers it drives.
	cpuProfile string
	// gcHeapFloor is the driver's own heap floor (internal/gcfloor): the
	// simulated fleet's collector takes CPU from the servers it drives
	// on the same machine.
	gcHeapFloor uint64
	tls         clientOptions // only the TLS files are flags
}

func benchCommand(stdout, stderr io.Writer) *ffcli.Command {
	fs := flag.NewFlagSet("drover bench", flag.ContinueOnError)
	fs.SetOutput(stderr)
	f := benchFlags{gcHeapFloor: defaultGCHeapFloor}
	fs.StringVar(&f.servers, "address", "", "comma-separated gRPC addresses of the cluster's servers (required)")
	aliasFlag(fs, "servers", "address")
	fs.StringVar(&f.metrics, "metrics", "", "comma-separated http://host:port/metrics URLs of the same servers, in order (for CPU, memory and raft bytes)")
	fs.StringVar(&f.scenario, "scenario", "", "c1m, c1m-full, churn, scale, concurrent or heartbeats (required)")
	fs.Float64Var(&f.scale, "scale", 1, "multiply the scenario's sizes (nodes, jobs, allocations) by this")
	fs.DurationVar(&f.timeout, "timeout", 0, "give up after this long (default: the scenario's, 30m)")
	fs.BoolVar(&f.json, "json", false, "print the report as JSON")
	fs.StringVar(&f.cpuProfile, "cpuprofile", "", "write the load driver's own CPU profile (pprof format) to this file")
	heapFloorFlag(fs, &f.gcHeapFloor, "heap size the load driver's Go collector lets it reach before it runs, as for drover server; 0 turns it off")
	tlsFileFlags(fs, &f.tls)
	return &ffcli.Command{
		Name:       "bench",
		ShortUsage: "drover bench -address host:port,... -scenario c1m|c1m-full|churn|scale|concurrent|heartbeats [flags]",
		ShortHelp:  "Drive a cluster with simulated nodes and jobs, and report what it did.",
		LongHelp: "Start simulated nodes against an existing cluster, submit the scenario's jobs,\n" +
			"wait until the cluster did what each step asked, and report placements and\n" +
			"evaluations per second, agent call latencies, server CPU and memory, and raft\n" +
			"entries and bytes. Scenarios (at -scale 1):\n" +
			"  c1m         5,000 nodes, 100 service jobs of 1,000 allocations\n" +
			"  c1m-full    5,000 nodes, 1,000 service jobs of 1,000 allocations (the full C1M)\n" +
			"  concurrent  5,000 nodes, one job of 10,000, then 20 jobs of 500 at once\n" +
			"  churn       2,000 nodes, 12 waves of batch jobs, 10% of nodes going silent\n" +
			"  scale       2,000 nodes, one job scaled 0 -> 20,000 -> 0\n" +
			"  heartbeats  50,000 heartbeat-only nodes held for a minute\n" +
			"Progress goes to stderr, the report to stdout.",
		FlagSet: fs,
		Exec: func(ctx context.Context, args []string) error {
			if err := noArgs(args); err != nil {
				return err
			}
			cfg, err := f.config()
			if err != nil {
				return asUsage(err)
			}
			cfg.Progress = stderr
			floorCtx, stopFloor := context.WithCancel(ctx)
			defer stopFloor()
			go gcfloor.Run(floorCtx, f.gcHeapFloor, slog.New(slog.NewTextHandler(stderr, nil)))
			stop, err := startCPUProfile(f.cpuProfile)
			if err != nil {
				return err
			}
			rep, err := loadgen.Run(ctx, cfg)
			if perr := stop(); perr != nil && err == nil {
				return perr
			}
			if err != nil {
				return report(stderr, "running the "+f.scenario+" benchmark", err, f.timeout)
			}
			if f.json {
				return printJSONObject(stdout, rep)
			}
			_, err = fmt.Fprint(stdout, rep.String())
			return err
		},
	}
}

// startCPUProfile starts the process's CPU profile into path, unless path
// is empty; stop ends it and closes the file.
func startCPUProfile(path string) (stop func() error, err error) {
	if path == "" {
		return func() error { return nil }, nil
	}
	out, err := os.Create(path)
	if err != nil {
		return nil, fmt.Errorf("-cpuprofile: %w", err)
	}
	if err := pprof.StartCPUProfile(out); err != nil {
		_ = out.Close()
		return nil, fmt.Errorf("-cpuprofile %s: %w", path, err)
	}
	return func() error {
		pprof.StopCPUProfile()
		if err := out.Close(); err != nil {
			return fmt.Errorf("-cpuprofile %s: %w", path, err)
		}
		return nil
	}, nil
}

// config checks the flags and returns the scenario's run configuration.
func (f benchFlags) config() (loadgen.Config, error) {
	var errs []error
	servers := commaList(f.servers)
	metrics := commaList(f.metrics)
	if len(servers) == 0 {
		errs = append(errs, errors.New("-address: give at least one server address"))
	}
	if len(metrics) > 0 && len(metrics) != len(servers) {
		errs = append(errs, fmt.Errorf("-metrics: %d URLs for %d servers; give one per server, in the same order", len(metrics), len(servers)))
	}
	for _, u := range metrics {
		if !strings.HasPrefix(u, "http://") && !strings.HasPrefix(u, "https://") {
			errs = append(errs, fmt.Errorf("-metrics: %q is not an http(s) URL", u))
		}
	}
	preset, ok := benchPreset(f.scenario)
	if !ok {
		errs = append(errs, fmt.Errorf("-scenario %q: want c1m, c1m-full, churn, scale, concurrent or heartbeats", f.scenario))
	}
	if !(f.scale > 0) || math.IsInf(f.scale, 0) {
		errs = append(errs, fmt.Errorf("-scale %g: want a number above 0", f.scale))
	}
	if f.timeout < 0 {
		errs = append(errs, fmt.Errorf("-timeout %s: want 0 or more", f.timeout))
	}
	if len(errs) > 0 {
		return loadgen.Config{}, errors.Join(errs...)
	}
	dial, err := fleetDialOptions(&f.tls, servers)
	if err != nil {
		return loadgen.Config{}, err
	}
	cfg := preset(f.scale)
	cfg.Servers, cfg.MetricsURLs, cfg.DialOptions = servers, metrics, dial
	if f.timeout > 0 {
		cfg.Timeout = f.timeout
	}
	return cfg, nil
}
