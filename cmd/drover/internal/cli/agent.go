package cli

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"github.com/peterbourgon/ff/v3/ffcli"

	"github.com/droverhq/drover/internal/simagent"
	droverv1 "github.com/droverhq/drover/proto/drover/v1"
)

// agentOptions are the flags of `drover agent`.
type agentOptions struct {
	tls            clientOptions // only the TLS files are flags
	servers        string
	simNodes       int
	datacenters    string
	classes        string
	cpu            int
	memory         int
	disk           int
	attributes     string
	nodeFile       string
	startDelay     time.Duration
	batchRunTime   time.Duration
	failureRate    float64
	healthDelay    time.Duration
	heartbeatOnly  bool
	flakyFraction  float64
	flakyEvery     time.Duration
	flakyOffline   time.Duration
	reorder        bool
	reportInterval time.Duration
	// set names the flags given on the command line.
	set map[string]bool
}

// templateFlags are the flags that describe nodes, which -node-file
// replaces.
var templateFlags = []string{"datacenters", "classes", "cpu", "memory", "disk", "attributes"}

// agentFlags defines the flags of `drover agent` on a new flag set.
func agentFlags(stderr io.Writer) (*flag.FlagSet, *agentOptions) {
	fs := flag.NewFlagSet("drover agent", flag.ContinueOnError)
	fs.SetOutput(stderr)
	o := &agentOptions{}
	def := simagent.DefaultTemplate()
	fs.StringVar(&o.servers, "address", "", "comma-separated gRPC addresses of servers (default: $"+addrEnv+", else "+defaultAddr+")")
	aliasFlag(fs, "servers", "address")
	fs.IntVar(&o.simNodes, "sim-nodes", 0, "number of simulated nodes (required)")
	fs.StringVar(&o.datacenters, "datacenters", strings.Join(def.Datacenters, ","), "comma-separated datacenters, given to the nodes in turn")
	fs.StringVar(&o.classes, "classes", strings.Join(def.Classes, ","), "comma-separated node classes, given to the nodes in turn")
	fs.IntVar(&o.cpu, "cpu", int(def.Resources.GetCpuMhz()), "CPU of each node, MHz")
	fs.IntVar(&o.memory, "memory", int(def.Resources.GetMemoryMb()), "memory of each node, MB")
	fs.IntVar(&o.disk, "disk", int(def.Resources.GetDiskMb()), "disk of each node, MB")
	fs.StringVar(&o.attributes, "attributes", "kernel.name=linux,cpu.arch=amd64", "node attributes, k=v,k=v")
	fs.StringVar(&o.nodeFile, "node-file", "", "JSON file of the node template (name_prefix, datacenters, classes, attributes, resources, reserved) instead of the flags above")
	fs.DurationVar(&o.startDelay, "start-delay", time.Second, "how long an allocation stays pending before it runs")
	fs.DurationVar(&o.batchRunTime, "batch-run-time", 30*time.Second, "how long a batch allocation runs before it completes")
	fs.Float64Var(&o.failureRate, "failure-rate", 0, "share of allocations (0-1) that fail instead of running (batch: instead of completing)")
	fs.DurationVar(&o.healthDelay, "health-delay", 0, "how long after it runs an allocation of a deployment is reported healthy (0: its group's min_healthy_time); job meta "+simagent.UnhealthyMetaKey+" = F makes that share of a version's allocations unhealthy")
	fs.BoolVar(&o.heartbeatOnly, "heartbeat-only", false, "only register and heartbeat: no GetAllocs, no allocations")
	fs.Float64Var(&o.flakyFraction, "flaky-fraction", 0, "share of nodes (0-1) that go silent now and then")
	fs.DurationVar(&o.flakyEvery, "flaky-every", time.Minute, "a flaky node goes silent once per this period")
	fs.DurationVar(&o.flakyOffline, "flaky-offline", 20*time.Second, "how long a flaky node stays silent")
	fs.BoolVar(&o.reorder, "reorder-on-return", false, "a returning flaky node sends register, heartbeat, report and GetAllocs in random order")
	fs.DurationVar(&o.reportInterval, "report-interval", 10*time.Second, "print a status line this often")
	tlsFileFlags(fs, &o.tls)
	return fs, o
}

func agentCommand(stdout, stderr io.Writer) *ffcli.Command {
	fs, o := agentFlags(stderr)
	return &ffcli.Command{
		Name:       "agent",
		ShortUsage: "drover agent -sim-nodes N [flags]",
		ShortHelp:  "Run simulated agents against a cluster.",
		LongHelp: "Simulate N agents in this process over the real gRPC API: register, heartbeat,\n" +
			"long-poll allocations, run them (pending, then running after -start-delay;\n" +
			"batch work completes after -batch-run-time) and report every change, failing\n" +
			"over between the -address servers. Runs until Ctrl-C or SIGTERM; prints a status line\n" +
			"every -report-interval.",
		FlagSet: fs,
		Exec: func(ctx context.Context, args []string) error {
			if err := noArgs(args); err != nil {
				return err
			}
			o.set = setFlags(fs)
			cfg, err := o.config()
			if err != nil {
				return asUsage(err)
			}
			ctx, stop := signal.NotifyContext(ctx, syscall.SIGINT, syscall.SIGTERM)
			defer stop()
			return runAgents(ctx, cfg, stdout, o.reportInterval)
		},
	}
}

// setFlags names the flags given on fs's command line.
func setFlags(fs *flag.FlagSet) map[string]bool {
	set := map[string]bool{}
	fs.Visit(func(f *flag.Flag) { set[f.Name] = true })
	return set
}

// config checks the flags and turns them into a fleet's configuration.
func (o *agentOptions) config() (simagent.Config, error) {
	var errs []error
	if o.simNodes < 1 {
		errs = append(errs, fmt.Errorf("-sim-nodes %d: give a positive number of nodes", o.simNodes))
	}
	if o.failureRate < 0 || o.failureRate > 1 {
		errs = append(errs, fmt.Errorf("-failure-rate %g: want 0 to 1", o.failureRate))
	}
	if o.flakyFraction < 0 || o.flakyFraction > 1 {
		errs = append(errs, fmt.Errorf("-flaky-fraction %g: want 0 to 1", o.flakyFraction))
	}
	if o.flakyFraction > 0 && (o.flakyOffline <= 0 || o.flakyOffline >= o.flakyEvery) {
		errs = append(errs, fmt.Errorf("-flaky-offline %s must be positive and shorter than -flaky-every %s", o.flakyOffline, o.flakyEvery))
	}
	if o.startDelay < 0 || o.batchRunTime < 0 {
		errs = append(errs, errors.New("-start-delay and -batch-run-time must not be negative"))
	}
	if o.reportInterval <= 0 {
		errs = append(errs, fmt.Errorf("-report-interval %s: must be positive", o.reportInterval))
	}
	tmpl, err := o.template()
	if err != nil {
		errs = append(errs, err)
	}
	servers := commaList(o.servers)
	if o.servers == "" {
		servers = []string{(&clientOptions{}).serverAddr()}
	}
	if len(servers) == 0 {
		errs = append(errs, fmt.Errorf("-address %q names no address", o.servers))
	}
	dial, err := fleetDialOptions(&o.tls, servers)
	if err != nil {
		errs = append(errs, err)
	}
	if err := errors.Join(errs...); err != nil {
		return simagent.Config{}, err
	}
	return simagent.Config{
		Servers:       servers,
		DialOptions:   dial,
		Nodes:         tmpl.Nodes(o.simNodes),
		HeartbeatOnly: o.heartbeatOnly,
		StartDelay:    o.startDelay,
		BatchRunTime:  o.batchRunTime,
		FailureRate:   o.failureRate,
		HealthDelay:   o.healthDelay,
		Faults: simagent.Faults{
			Fraction: o.flakyFraction, Every: o.flakyEvery, Offline: o.flakyOffline, ReorderOnReturn: o.reorder,
		},
	}, nil
}

// template is the node template of -node-file or of the flags.
func (o *agentOptions) template() (simagent.Template, error) {
	if o.nodeFile != "" {
		for _, name := range templateFlags {
			if o.set[name] {
				return simagent.Template{}, fmt.Errorf("-node-file replaces -%s: give one or the other", name)
			}
		}
		return readNodeFile(o.nodeFile)
	}
	attrs, err := parseAttributes(o.attributes)
	if err != nil {
		return simagent.Template{}, err
	}
	if o.cpu <= 0 || o.memory <= 0 || o.disk < 0 {
		return simagent.Template{}, fmt.Errorf("-cpu %d and -memory %d must be positive, -disk %d not negative", o.cpu, o.memory, o.disk)
	}
	t := simagent.DefaultTemplate()
	t.Datacenters, t.Classes, t.Attributes = commaList(o.datacenters), commaList(o.classes), attrs
	t.Resources = &droverv1.NodeResources{CpuMhz: int64(o.cpu), MemoryMb: int64(o.memory), DiskMb: int64(o.disk)}
	if len(t.Datacenters) == 0 {
		return simagent.Template{}, errors.New("-datacenters names no datacenter")
	}
	return t, nil
}

// nodeFile is the JSON form of -node-file.
type nodeFile struct {
	NamePrefix  string            `json:"name_prefix"`
	Datacenters []string          `json:"datacenters"`
	Classes     []string          `json:"classes"`
	Attributes  map[string]string `json:"attributes"`
	Resources   *nodeResources    `json:"resources"`
	Reserved    *nodeResources    `json:"reserved"`
}

// nodeResources are the resources of a node file, named as in the
// protobuf messages.
type nodeResources struct {
	CPUMHz   int64 `json:"cpu_mhz"`
	MemoryMB int64 `json:"memory_mb"`
	DiskMB   int64 `json:"disk_mb"`
}

// readNodeFile reads a node template; missing fields keep the defaults.
func readNodeFile(path string) (simagent.Template, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return simagent.Template{}, fmt.Errorf("-node-file: %w", err)
	}
	var nf nodeFile
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&nf); err != nil {
		return simagent.Template{}, fmt.Errorf("-node-file %s: %w", path, err)
	}
	t := simagent.DefaultTemplate()
	if nf.NamePrefix != "" {
		t.NamePrefix = nf.NamePrefix
	}
	if len(nf.Datacenters) > 0 {
		t.Datacenters = nf.Datacenters
	}
	if nf.Classes != nil {
		t.Classes = nf.Classes
	}
	if nf.Attributes != nil {
		t.Attributes = nf.Attributes
	}
	if r := nf.Resources; r != nil {
		if r.CPUMHz <= 0 || r.MemoryMB <= 0 {
			return simagent.Template{}, fmt.Errorf("-node-file %s: resources need a positive cpu_mhz and memory_mb", path)
		}
		t.Resources = &droverv1.NodeResources{CpuMhz: r.CPUMHz, MemoryMb: r.MemoryMB, DiskMb: r.DiskMB}
	}
	if r := nf.Reserved; r != nil {
		t.Reserved = &droverv1.NodeReservedResources{CpuMhz: r.CPUMHz, MemoryMb: r.MemoryMB, DiskMb: r.DiskMB}
	}
	return t, nil
}

// parseAttributes parses k=v,k=v.
func parseAttributes(list string) (map[string]string, error) {
	attrs := map[string]string{}
	for _, kv := range commaList(list) {
		k, v, ok := strings.Cut(kv, "=")
		if !ok || strings.TrimSpace(k) == "" {
			return nil, fmt.Errorf("-attributes: %q is not key=value", kv)
		}
		attrs[strings.TrimSpace(k)] = strings.TrimSpace(v)
	}
	return attrs, nil
}

// commaList splits a comma-separated list, dropping empty items.
func commaList(list string) []string {
	var out []string
	for _, s := range strings.Split(list, ",") {
		if s = strings.TrimSpace(s); s != "" {
			out = append(out, s)
		}
	}
	return out
}
