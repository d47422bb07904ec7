package test_test

import (
	"context"
	"fmt"
	"os"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/droverhq/drover/internal/mock"
	"github.com/droverhq/drover/internal/simagent"
	droverv1 "github.com/droverhq/drover/proto/drover/v1"
	"github.com/droverhq/drover/test/cluster"
)

// The size of TestUITopology. `make bench-ui` sets the environment to
// measure the view with 5,000 nodes, 5 page loads (docs/benchmarks.md);
// `make test` runs the defaults, which keep the test short under -race on
// 2 cores.
const (
	topologyNodesEnv     = "DROVER_UI_TOPOLOGY_NODES"
	topologyRunsEnv      = "DROVER_UI_TOPOLOGY_RUNS"
	topologyNodesDefault = 300
	// topologyUpdates is how many nodes are marked ineligible, one at a
	// time, each change timed from its event's arrival to its draw.
	topologyUpdates = 5
	// topologyProbes is how many nodes stop heartbeating and must show down.
	topologyProbes = 2
)

// Resources of the test's jobs: "web" fits any node, "cache" only the
// large ones (its memory exceeds what a standard node offers).
const (
	webCPU, webMemory     = 1200, 2048
	cacheCPU, cacheMemory = 4000, 16384
)

// envInt reads a positive integer from the environment, or def.
func envInt(t *testing.T, name string, def int) int {
	t.Helper()
	v := os.Getenv(name)
	if v == "" {
		return def
	}
	n, err := strconv.Atoi(v)
	if err != nil || n <= 0 {
		t.Fatalf("%s=%q: want a positive number", name, v)
	}
	return n
}

// topologyFleet gives a fleet n nodes in two datacenters and two classes:
// three of four standard machines, one of four large.
func topologyFleet(n int) func(*simagent.Config) {
	return func(cfg *simagent.Config) {
		standard := simagent.DefaultTemplate()
		standard.NamePrefix, standard.Datacenters = "std", []string{"dc1", "dc2"}
		large := simagent.DefaultTemplate()
		large.NamePrefix, large.Datacenters, large.Classes = "big", []string{"dc1", "dc2"}, []string{"large"}
		large.Resources = &droverv1.NodeResources{CpuMhz: 16000, MemoryMb: 65536, DiskMb: 500000}
		cfg.Nodes = make([]simagent.Node, n)
		for i := range cfg.Nodes {
			if i%4 == 3 {
				// Numbered among the large ones, so that they alternate
				// between the datacenters too.
				cfg.Nodes[i] = large.Node(i / 4)
			} else {
				cfg.Nodes[i] = standard.Node(i)
			}
		}
	}
}

// topologyJob is a service job of count allocations of cpu and memory in
// both datacenters.
func topologyJob(id string, count int32, cpu, memory int64) *droverv1.Job {
	j := mock.Job(count)
	j.Id, j.Name, j.Datacenters = id, id, []string{"dc1", "dc2"}
	j.TaskGroups[0].Resources.CpuMhz, j.TaskGroups[0].Resources.MemoryMb = cpu, memory
	return j
}

// usageTotals sums NodeService.Usage over every page: the nodes and what
// their allocations hold.
func usageTotals(ctx context.Context, s *cluster.Server) (nodes []*droverv1.NodeUsage, cpu, memory int64, err error) {
	client := droverv1.NewNodeServiceClient(s.Conn())
	page := &droverv1.PageOptions{}
	for {
		cctx, cancel := context.WithTimeout(ctx, callTimeout)
		resp, err := client.Usage(cctx, &droverv1.NodeUsageRequest{Page: page})
		cancel()
		if err != nil {
			return nil, 0, 0, fmt.Errorf("usage after %q: %w", page.GetNextToken(), err)
		}
		for _, u := range resp.GetNodes() {
			nodes = append(nodes, u)
			cpu += u.GetUsed().GetCpuMhz()
			memory += u.GetUsed().GetMemoryMb()
		}
		if page.NextToken = resp.GetNextToken(); page.NextToken == "" {
			return nodes, cpu, memory, nil
		}
	}
}

// jsNumber evaluates a numeric expression in the page.
func jsNumber(ctx context.Context, t *testing.T, expr string) float64 {
	t.Helper()
	v, err := chromedp.Run(ctx, chromedp.Evaluate[float64](expr))
	if err != nil {
		t.Fatalf("browser: %s: %v", expr, err)
	}
	return v
}

// medianMs is the median of xs (sorted in place).
func medianMs(xs []float64) float64 {
	slices.Sort(xs)
	if len(xs)%2 == 1 {
		return xs[len(xs)/2]
	}
	return (xs[len(xs)/2-1] + xs[len(xs)/2]) / 2
}

// countIs is a page condition: the topology's figure name (a count or a
// total in use) is n.
func countIs(name string, n int) string {
	return fmt.Sprintf(`document.querySelector('main [data-count=%q]')?.dataset.value === '%d'`, name, n)
}

// TestUITopology drives the topology view against one server and a
// simulated fleet (300 nodes; DROVER_UI_TOPOLOGY_NODES sets another size)
// in two datacenters and two classes, running two jobs: the view draws
// every node with the counts and the CPU and memory in use the API
// reports; nodes marked ineligible through the API and a job stopped show
// without a reload; pointing at a cell names its node and a click opens
// the node's view; no JavaScript error. It logs the first render and
// update times (docs/benchmarks.md records them for 5,000 nodes; nothing
// here asserts a time).
func TestUITopology(t *testing.T) {
	n := envInt(t, topologyNodesEnv, topologyNodesDefault)
	runs := envInt(t, topologyRunsEnv, 1)
	ctx := within(t, t.Context(), 3*time.Minute+time.Duration(n)*30*time.Millisecond)
	errs := &consoleErrors{}
	browser := startBrowser(ctx, t, errs)

	// Probe nodes that stop heartbeating must show down, which takes
	// heartbeat TTLs of seconds rather than the harness's hour; the grace
	// is generous so that no other node, late on a loaded machine, goes
	// down too. Only at the default size: 5,000 nodes heartbeating every
	// few seconds would load the 2 cores the measurement is about.
	probing := n <= topologyNodesDefault
	opts := []cluster.Option{httpArgs()}
	if probing {
		opts = append(opts, cluster.Args("-heartbeat-min-ttl", "2s", "-heartbeat-grace", "5s", "-heartbeat-max-per-second", "1000"))
	} else {
		// Debug lines for thousands of registrations would be CPU taken
		// from the measurement; as in the load benchmarks.
		opts = append(opts, cluster.Args("-log-level", "info"))
	}
	c := cluster.New(t, droverBin, 1, opts...)
	leader := c.WaitLeader(ctx)
	start := time.Now()
	fleet := startSimFleet(ctx, t, c, n, simAllocs, topologyFleet(n))
	total := n
	var probes *simagent.Fleet
	if probing {
		probes = startSimFleet(ctx, t, c, topologyProbes, simAllocs, func(cfg *simagent.Config) {
			tmpl := simagent.DefaultTemplate()
			// In the last block, whose first cells they are (by name).
			tmpl.NamePrefix, tmpl.Datacenters = "probe", []string{"dc2"}
			cfg.Nodes = tmpl.Nodes(topologyProbes)
		})
		waitFleetReady(ctx, t, probes)
		total += topologyProbes
	}
	waitFleetReady(ctx, t, fleet)
	t.Logf("%d simulated nodes ready in %s", total, time.Since(start).Round(time.Millisecond))
	webCount, cacheCount := int32(n), int32(n/4)
	for _, j := range []*droverv1.Job{
		topologyJob("web", webCount, webCPU, webMemory),
		topologyJob("cache", cacheCount, cacheCPU, cacheMemory),
	} {
		if _, err := registerJob(ctx, leader.Conn(), j, ""); err != nil {
			t.Fatalf("register %s: %v", j.GetId(), err)
		}
	}
	wantCPU := int64(webCount)*webCPU + int64(cacheCount)*cacheCPU
	var nodes []*droverv1.NodeUsage
	poll(ctx, t, "every allocation placed", func() (bool, string) {
		var cpu, memory int64
		var err error
		if nodes, cpu, memory, err = usageTotals(ctx, leader); err != nil {
			return false, err.Error()
		}
		return cpu == wantCPU, fmt.Sprintf("%d MHz and %d MB in use, want %d MHz", cpu, memory, wantCPU)
	})
	t.Logf("jobs placed %s after start", time.Since(start).Round(time.Millisecond))
	base := "http://" + leader.Info().HTTPAddr

	var first, load, draw []float64
	for run := range runs {
		if err := chromedp.Do(browser, chromedp.Navigate(base+"/ui/topology")); err != nil {
			t.Fatal(err)
		}
		waitJS(browser, t, fmt.Sprintf("%d ready nodes drawn, %d MHz in use", total, wantCPU),
			fmt.Sprintf(`window.droverTopology?.nodes === %d && %s && %s && %s`,
				total, countIs("total", total), countIs("ready", total), countIs("cpu-used", int(wantCPU))))
		first = append(first, jsNumber(browser, t, `droverTopology.firstRenderMs`))
		load = append(load, jsNumber(browser, t, `droverTopology.loadMs`))
		draw = append(draw, jsNumber(browser, t, `droverTopology.drawMs`))
		t.Logf("topology: run %d: %d nodes: first render %.0f ms (usage read %.0f ms, draw %.1f ms)", run+1, total, first[run], load[run], draw[run])
	}
	groups := jsNumber(browser, t, `droverTopology.groups.length`)
	if groups != 4 {
		t.Errorf("%v groups drawn, want 4 (2 datacenters × 2 classes)", groups)
	}
	// The changes below must come as events: wait until the page's event
	// stream is subscribed. The server answers a stream's headers only
	// with its first batch and the cluster is quiet now, so write
	// something that makes one: a job with nothing to place.
	if _, err := registerJob(ctx, leader.Conn(), topologyJob("poke", 0, webCPU, webMemory), ""); err != nil {
		t.Fatalf("register poke: %v", err)
	}
	waitJS(browser, t, "the event stream connected", `!!document.querySelector('#live.s-live')`)
	if err := chromedp.Do(browser, chromedp.Evaluate[chromedp.Void](`window.droverNoReload = true`)); err != nil {
		t.Fatal(err)
	}

	t.Run("node changes without a reload", func(t *testing.T) {
		var took []float64
		for i, u := range nodes[:min(topologyUpdates, len(nodes))] {
			body := []byte(`{"eligibility":"SCHEDULING_ELIGIBILITY_INELIGIBLE"}`)
			a, err := callHTTP(ctx, leader.Info().HTTPAddr, "POST", "/v1/node/"+u.GetId()+"/eligibility", body, nil)
			if err != nil || a.status != 200 {
				t.Fatalf("mark %s ineligible: %d %s %v", u.GetId(), a.status, a.body, err)
			}
			seen := fmt.Sprintf(`droverTopology.updates.find((u) => u.key === %q && u.type === 'NodeEligibilityUpdated')`, u.GetId())
			waitJS(browser, t, fmt.Sprintf("node %s shown ineligible", u.GetId()),
				fmt.Sprintf(`!!%s && %s && window.droverNoReload === true`, seen, countIs("ineligible", i+1)))
			took = append(took, jsNumber(browser, t, seen+`.ms`))
		}
		t.Logf("topology: %d nodes: update (event to draw) median %.1f ms of %d: %v", total, medianMs(slices.Clone(took)), len(took), took)
	})

	// The tooltip in the screenshot: on a down probe once its allocations
	// are lost (they are re-read after the allocation events), else on the
	// last block's first node; below the drawing either way, so that it
	// hides little.
	tipNode, tipWants := "", []string{"CPU", "MHz"}
	if probing {
		t.Run("nodes down without a reload", func(t *testing.T) {
			probes.Stop()
			waitJS(browser, t, fmt.Sprintf("%d nodes down", topologyProbes),
				fmt.Sprintf(`%s && %s && window.droverNoReload === true`, countIs("down", topologyProbes), countIs("ready", total-topologyProbes)))
		})
		tipNode, tipWants = probes.Agents()[0].Node().ID, []string{"down", "CPU 0 of"}
	}

	t.Run("tooltip", func(t *testing.T) {
		id := tipNode
		if id == "" {
			id = blockFirst(t, browser, -1)
		}
		pointAt(t, browser, id)
		cond := fmt.Sprintf(`!tip.hidden && tip.dataset.node === %q`, id)
		for _, w := range tipWants {
			cond += fmt.Sprintf(` && tip.textContent.includes(%q)`, w)
		}
		waitJS(browser, t, fmt.Sprintf("the tooltip naming node %s with %q", id, tipWants),
			`(() => { const tip = document.getElementById('topology-tip'); return `+cond+`; })()`)
		screenshot(browser, t, "topology")
	})

	t.Run("allocations stopped without a reload", func(t *testing.T) {
		a, err := callHTTP(ctx, leader.Info().HTTPAddr, "DELETE", "/v1/job/cache", nil, nil)
		if err != nil || a.status != 200 {
			t.Fatalf("stop cache: %d %s %v", a.status, a.body, err)
		}
		waitJS(browser, t, "only web's CPU in use",
			fmt.Sprintf(`%s && window.droverNoReload === true`, countIs("cpu-used", int(webCount)*webCPU)))
	})

	t.Run("click opens the node", func(t *testing.T) {
		id := blockFirst(t, browser, 0)
		x, y := pointAt(t, browser, id)
		if err := chromedp.Do(browser, chromedp.MouseClickXY(x, y)); err != nil {
			t.Fatal(err)
		}
		waitJS(browser, t, "the node's address", fmt.Sprintf(`location.pathname === '/ui/nodes/%s'`, id))
	})

	if len(first) > 1 {
		t.Logf("topology: %d nodes, %d page loads: first render median %.0f ms (usage read %.0f ms, draw %.1f ms)",
			total, runs, medianMs(first), medianMs(load), medianMs(draw))
	}
	// Let the page's last requests and events land before looking.
	if err := chromedp.Do(browser, chromedp.Navigate("about:blank")); err != nil {
		t.Fatal(err)
	}
	errs.check(t)
}

// blockFirst returns the node id of the first cell of a block (group, a
// JavaScript index: 0, or -1 for the last).
func blockFirst(t *testing.T, browser context.Context, group int) string {
	t.Helper()
	id, err := chromedp.Run(browser, chromedp.Evaluate[string](fmt.Sprintf(`droverTopology.groups.at(%d).first`, group)))
	if err != nil {
		t.Fatal(err)
	}
	return id
}

// pointAt scrolls a node's cell into the window (with 5,000 nodes the
// drawing is taller than the window), moves the mouse over it and returns
// where it is.
func pointAt(t *testing.T, browser context.Context, id string) (x, y float64) {
	t.Helper()
	scroll := fmt.Sprintf(`window.scrollBy(0, droverTopology.cellPoint(%q).y - innerHeight / 2)`, id)
	if err := chromedp.Do(browser, chromedp.Evaluate[chromedp.Void](scroll)); err != nil {
		t.Fatal(err)
	}
	x = jsNumber(browser, t, fmt.Sprintf(`droverTopology.cellPoint(%q).x`, id))
	y = jsNumber(browser, t, fmt.Sprintf(`droverTopology.cellPoint(%q).y`, id))
	if err := chromedp.Do(browser, chromedp.MouseEvent(chromedp.MouseMoved, x, y)); err != nil {
		t.Fatal(err)
	}
	return x, y
}
