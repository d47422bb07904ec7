package cli

import (
	"cmp"
	"context"
	"flag"
	"fmt"
	"io"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/peterbourgon/ff/v3/ffcli"

	droverv1 "github.com/droverhq/drover/proto/drover/v1"
)

func nodeStatusCommand(stdout, stderr io.Writer) *ffcli.Command {
	fs := flag.NewFlagSet("drover node status", flag.ContinueOnError)
	fs.SetOutput(stderr)
	opts := clientFlags(fs, true)
	var verbose bool
	fs.BoolVar(&verbose, "verbose", false, "show full ids and the node's attributes")
	return &ffcli.Command{
		Name:       "status",
		ShortUsage: "drover node status [flags] [ID]",
		ShortHelp:  "List nodes, or show one with its allocations and events.",
		LongHelp: "Without ID, list every node, sorted by name. With ID, show the node: status,\n" +
			"eligibility, drain, resources, then its allocations, newest first, and its\n" +
			"recent events, newest first. ID may be a unique prefix of the node id. With\n" +
			"-json the one-node form prints {\"node\", \"allocs\", \"meta\"}; node secrets\n" +
			"are never shown.",
		FlagSet: fs,
		Exec: func(ctx context.Context, args []string) error {
			if len(args) > 1 {
				return usageErrorf("give at most one node id, not %d", len(args))
			}
			ctx, s, closeSession, err := openSession(ctx, opts, stderr)
			if err != nil {
				return err
			}
			defer closeSession()
			if len(args) == 0 {
				return listNodes(ctx, s, stdout, verbose)
			}
			return showNode(ctx, s, stdout, args[0], verbose)
		},
	}
}

// listNodes prints every node, read page by page.
func listNodes(ctx context.Context, s *session, w io.Writer, verbose bool) error {
	c := droverv1.NewNodeServiceClient(s.conn)
	var meta *droverv1.QueryMeta
	nodes, err := allPages(ctx, func(ctx context.Context, token string) ([]*droverv1.Node, string, error) {
		resp, err := c.List(ctx, &droverv1.ListNodesRequest{Page: &droverv1.PageOptions{NextToken: token}})
		meta = resp.GetMeta()
		return resp.GetNodes(), resp.GetNextToken(), err
	})
	if err != nil {
		return s.fail(ctx, "listing nodes", err)
	}
	for i, n := range nodes {
		nodes[i] = n.Sanitized()
	}
	if s.opts.json {
		return printJSON(w, &droverv1.ListNodesResponse{Nodes: nodes, Meta: meta})
	}
	return printNodeList(w, nodes, verbose)
}

// printNodeList writes one line per node, sorted by name, then id.
func printNodeList(w io.Writer, nodes []*droverv1.Node, verbose bool) error {
	if len(nodes) == 0 {
		_, err := fmt.Fprintln(w, "No nodes registered")
		return err
	}
	nodes = slices.Clone(nodes)
	slices.SortStableFunc(nodes, func(a, b *droverv1.Node) int {
		return cmp.Or(strings.Compare(a.GetName(), b.GetName()), strings.Compare(a.GetId(), b.GetId()))
	})
	id := shortID
	if verbose {
		id = func(s string) string { return s }
	}
	tw := newTable(w)
	fmt.Fprintln(tw, "ID\tName\tDC\tClass\tDrain\tEligibility\tStatus")
	for _, n := range nodes {
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%t\t%s\t%s\n", id(n.GetId()), n.GetName(), n.GetDatacenter(),
			orDash(n.GetNodeClass()), n.GetDrainStrategy() != nil, enumName(n.GetSchedulingEligibility()), enumName(n.GetStatus()))
	}
	return tw.Flush()
}

// showNode prints one node with its allocations and events.
func showNode(ctx context.Context, s *session, w io.Writer, id string, verbose bool) error {
	resp, err := resolveNode(ctx, s, id)
	if err != nil {
		return s.fail(ctx, fmt.Sprintf("reading node %q", id), err)
	}
	resp.Node = resp.GetNode().Sanitized()
	if s.opts.json {
		return printJSON(w, resp)
	}
	return printNodeStatus(w, nodeView{node: resp.GetNode(), allocs: resp.GetAllocs(), now: time.Now(), verbose: verbose})
}

// nodeView is what `node status ID` shows, read from the server.
type nodeView struct {
	node    *droverv1.Node
	allocs  []*droverv1.Allocation
	now     time.Time // ages are relative to it
	verbose bool      // full ids, attributes
}

func (v nodeView) id(s string) string {
	if v.verbose {
		return s
	}
	return shortID(s)
}

func printNodeStatus(w io.Writer, v nodeView) error {
	n := v.node
	err := printFields(w, []field{
		{"ID", n.GetId()},
		{"Name", n.GetName()},
		{"Datacenter", n.GetDatacenter()},
		{"Class", orNone(n.GetNodeClass())},
		{"Status", enumName(n.GetStatus())},
		{"Status Description", orNone(n.GetStatusDescription())},
		{"Status Since", formatAgo(n.GetStatusUpdatedAt(), v.now)},
		{"Eligibility", enumName(n.GetSchedulingEligibility())},
		{"Drain", drainSummary(n.GetDrainStrategy(), v.now)},
		{"Resources", formatResources(n.GetResources().GetCpuMhz(), n.GetResources().GetMemoryMb(), n.GetResources().GetDiskMb())},
		{"Reserved", formatReserved(n.GetReserved())},
		{"Allocated", allocatedSummary(v.allocs)},
		{"Agent Version", orNone(n.GetAgentVersion())},
		{"Create Index", strconv.FormatUint(n.GetCreateIndex(), 10)},
		{"Modify Index", strconv.FormatUint(n.GetModifyIndex(), 10)},
	})
	if err != nil {
		return err
	}
	if v.verbose {
		if err := printAttributes(w, n.GetAttributes()); err != nil {
			return err
		}
	}
	if err := v.printAllocs(w); err != nil {
		return err
	}
	return printNodeEvents(w, n.GetEvents())
}

// drainSummary is the Drain field: false, or true with when the drain
// began, its deadline and whether system jobs stay.
func drainSummary(ds *droverv1.DrainStrategy, now time.Time) string {
	if ds == nil {
		return "false"
	}
	deadline := "no deadline"
	if ds.GetDeadline() != 0 {
		deadline = "deadline " + formatTime(ds.GetDeadline())
	}
	parts := []string{"started " + formatAgo(ds.GetStartedAt(), now), deadline}
	if ds.GetIgnoreSystemJobs() {
		parts = append(parts, "system jobs stay")
	}
	return "true (" + strings.Join(parts, ", ") + ")"
}

// formatResources shows an amount of cpu, memory and disk.
func formatResources(cpuMHz, memoryMB, diskMB int64) string {
	return fmt.Sprintf("%d MHz CPU, %d MB memory, %d MB disk", cpuMHz, memoryMB, diskMB)
}

// formatReserved shows what a node keeps back, reserved ports included.
func formatReserved(r *droverv1.NodeReservedResources) string {
	s := formatResources(r.GetCpuMhz(), r.GetMemoryMb(), r.GetDiskMb())
	if len(r.GetPorts()) == 0 {
		return s
	}
	ranges := make([]string, len(r.GetPorts()))
	for i, pr := range r.GetPorts() {
		ranges[i] = strconv.Itoa(int(pr.GetFirst()))
		if pr.GetLast() != pr.GetFirst() {
			ranges[i] += "-" + strconv.Itoa(int(pr.GetLast()))
		}
	}
	return s + ", ports " + strings.Join(ranges, ",")
}

// allocatedSummary adds up what the node's allocations hold: every one not
// yet client-terminal, since resources are released only then.
func allocatedSummary(allocs []*droverv1.Allocation) string {
	var cpu, mem, disk int64
	for _, a := range allocs {
		if a.ClientTerminal() {
			continue
		}
		cpu += a.GetResources().GetCpuMhz()
		mem += a.GetResources().GetMemoryMb()
		disk += a.GetResources().GetDiskMb()
	}
	return formatResources(cpu, mem, disk)
}

// printAttributes writes the node's attributes, sorted by name.
func printAttributes(w io.Writer, attrs map[string]string) error {
	fmt.Fprintln(w, "\nAttributes")
	if len(attrs) == 0 {
		_, err := fmt.Fprintln(w, "No attributes")
		return err
	}
	names := make([]string, 0, len(attrs))
	for name := range attrs {
		names = append(names, name)
	}
	slices.Sort(names)
	fields := make([]field, len(names))
	for i, name := range names {
		fields[i] = field{name, attrs[name]}
	}
	return printFields(w, fields)
}

// printAllocs writes the node's allocations, newest first.
func (v nodeView) printAllocs(w io.Writer) error {
	fmt.Fprintln(w, "\nAllocations")
	if len(v.allocs) == 0 {
		_, err := fmt.Fprintln(w, "No allocations placed")
		return err
	}
	allocs := slices.Clone(v.allocs)
	slices.SortStableFunc(allocs, func(a, b *droverv1.Allocation) int {
		return cmp.Or(cmp.Compare(b.GetCreateIndex(), a.GetCreateIndex()), strings.Compare(a.GetId(), b.GetId()))
	})
	tw := newTable(w)
	fmt.Fprintln(tw, "ID\tJob ID\tTask Group\tVersion\tDesired\tStatus\tCreated\tModified")
	for _, a := range allocs {
		fmt.Fprintf(tw, "%s\t%s\t%s\t%d\t%s\t%s\t%s\t%s\n", v.id(a.GetId()), a.GetJobId(), a.GetTaskGroup(),
			a.GetJobVersion(), enumName(a.GetDesiredStatus()), enumName(a.GetClientStatus()),
			formatAgo(a.GetCreateTime(), v.now), formatAgo(a.GetModifyTime(), v.now))
	}
	return tw.Flush()
}

// printNodeEvents writes the node's events, newest first.
func printNodeEvents(w io.Writer, events []*droverv1.NodeEvent) error {
	fmt.Fprintln(w, "\nEvents")
	if len(events) == 0 {
		_, err := fmt.Fprintln(w, "No events")
		return err
	}
	// The node keeps them oldest first; events of one moment keep that order,
	// reversed.
	events = slices.Clone(events)
	slices.Reverse(events)
	slices.SortStableFunc(events, func(a, b *droverv1.NodeEvent) int { return cmp.Compare(b.GetTime(), a.GetTime()) })
	tw := newTable(w)
	fmt.Fprintln(tw, "Time\tSubsystem\tMessage")
	for _, ev := range events {
		fmt.Fprintf(tw, "%s\t%s\t%s\n", formatTime(ev.GetTime()), orDash(ev.GetSubsystem()), ev.GetMessage())
	}
	return tw.Flush()
}
