package test_test

import (
	"context"
	"fmt"
	"reflect"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/durationpb"

	"github.com/droverhq/drover/internal/mock"
	"github.com/droverhq/drover/internal/simagent"
	droverv1 "github.com/droverhq/drover/proto/drover/v1"
	"github.com/droverhq/drover/test/cluster"
)

// classIs constrains a job to the nodes of class.
func classIs(class string) *droverv1.Constraint {
	return &droverv1.Constraint{Attribute: "node.class", Operator: droverv1.ConstraintOperator_CONSTRAINT_OPERATOR_EQUAL, Value: class}
}

// placementCounts is one group's placement failure as the evaluation view
// shows it, to compare with the API's.
type placementCounts struct {
	Evaluated   int32            `json:"evaluated"`
	Filtered    int32            `json:"filtered"`
	Exhausted   int32            `json:"exhausted"`
	FilteredBy  map[string]int32 `json:"filtered_by"`
	ExhaustedBy map[string]int32 `json:"exhausted_by"`
}

// shownCounts reads the evaluation view's table of group.
func shownCounts(group string) string {
	return fmt.Sprintf(`(() => {
		const s = document.querySelector('.placement[data-group=%q]');
		const n = (m) => Number(s.querySelector('tr[data-metric="' + m + '"]').lastElementChild.textContent);
		const by = (attr) => Object.fromEntries([...s.querySelectorAll('tr[' + attr + ']')]
			.map((tr) => [tr.getAttribute(attr), Number(tr.lastElementChild.textContent)]));
		return { evaluated: n('evaluated'), filtered: n('filtered'), exhausted: n('exhausted'),
			filtered_by: by('data-filtered'), exhausted_by: by('data-exhausted') };
	})()`, group)
}

// getHTTP reads path through the HTTP API, as the page does, into msg.
func getHTTP(ctx context.Context, t *testing.T, addr, path string, msg proto.Message) {
	t.Helper()
	a, err := callHTTP(ctx, addr, "GET", path, nil, nil)
	if err != nil || a.status != 200 {
		t.Fatalf("GET %s: %d %s %v", path, a.status, a.body, err)
	}
	if err := protojson.Unmarshal(a.body, msg); err != nil {
		t.Fatalf("GET %s: %v", path, err)
	}
}

// TestUIViews drives the allocation and evaluation views in headless
// Chromium against 1 server and 4 simulated nodes: two of class standard,
// one of class gpu, and one of class flaky where every allocation fails.
// Job web places: its allocation's view, reached from the job view's link,
// shows it running on its ready node, and follows the job's stop without
// a reload. Job big wants class gpu and more memory than any node has, so
// its evaluation leaves a blocked one: the evaluations list filters to it,
// and its view shows the counts of nodes filtered and exhausted that the
// API records. Job flaky fails and is rescheduled: the replacement and the
// failed allocation link to each other. No page has a JavaScript error.
func TestUIViews(t *testing.T) {
	ctx := within(t, testContext(t), time.Minute)
	errs := &consoleErrors{}
	browser := startBrowser(ctx, t, errs)

	c := cluster.New(t, droverBin, 1, httpArgs())
	leader := c.WaitLeader(ctx)
	fleet := startSimFleet(ctx, t, c, 3, simAllocs, func(cfg *simagent.Config) {
		tmpl := simagent.DefaultTemplate()
		tmpl.Classes = []string{"standard", "standard", "gpu"}
		cfg.Nodes = tmpl.Nodes(3)
	})
	waitFleetReady(ctx, t, fleet)
	// One node more, of its own class, where every allocation fails.
	flakyFleet := startSimFleet(ctx, t, c, 1, simAllocs, func(cfg *simagent.Config) {
		tmpl := simagent.DefaultTemplate()
		tmpl.NamePrefix, tmpl.Classes = "flaky", []string{"flaky"}
		cfg.Nodes, cfg.FailureRate = tmpl.Nodes(1), 1
	})
	waitFleetReady(ctx, t, flakyFleet)

	web := mock.Job(1)
	web.Id, web.Name = "web", "web"
	web.Constraints = []*droverv1.Constraint{classIs("standard")}
	// A batch job: no deployment, so no evaluations but the one that
	// blocks and the blocked one it leaves.
	big := mock.JobOfType(droverv1.JobType_JOB_TYPE_BATCH, 1)
	big.Id, big.Name = "big", "big"
	big.Constraints = []*droverv1.Constraint{classIs("gpu")}
	big.GetTaskGroups()[0].GetResources().MemoryMb = 1 << 20
	// Fails on the flaky node, and is rescheduled there once (the batch
	// policy's one attempt) without the default 5 s delay.
	flaky := mock.JobOfType(droverv1.JobType_JOB_TYPE_BATCH, 1)
	flaky.Id, flaky.Name = "flaky", "flaky"
	flaky.Constraints = []*droverv1.Constraint{classIs("flaky")}
	flaky.GetTaskGroups()[0].GetReschedulePolicy().Delay = durationpb.New(100 * time.Millisecond)
	for _, j := range []*droverv1.Job{web, big, flaky} {
		if _, err := registerJob(ctx, leader.Conn(), j, ""); err != nil {
			t.Fatal(err)
		}
	}
	addr := leader.Info().HTTPAddr
	base := "http://" + addr

	var alloc *droverv1.Allocation
	poll(ctx, t, "web's allocation running", func() (bool, string) {
		allocs, err := jobAllocs(ctx, leader.Conn(), "web")
		if err != nil || len(allocs) != 1 {
			return false, fmt.Sprintf("%d allocations, %v", len(allocs), err)
		}
		alloc = allocs[0]
		return alloc.GetClientStatus() == droverv1.AllocClientStatus_ALLOC_CLIENT_STATUS_RUNNING, alloc.GetClientStatus().String()
	})
	var blocked *droverv1.Evaluation
	poll(ctx, t, "big's evaluation blocked", func() (bool, string) {
		var resp droverv1.ListJobEvaluationsResponse
		getHTTP(ctx, t, addr, "/v1/job/big/evaluations", &resp)
		for _, ev := range resp.GetEvaluations() {
			if ev.GetStatus() == droverv1.EvalStatus_EVAL_STATUS_BLOCKED {
				blocked = ev
				return true, ""
			}
		}
		return false, "no blocked evaluation"
	})

	var replacement *droverv1.Allocation
	poll(ctx, t, "flaky's allocation rescheduled", func() (bool, string) {
		allocs, err := jobAllocs(ctx, leader.Conn(), "flaky")
		if err != nil {
			return false, err.Error()
		}
		for _, a := range allocs {
			if a.GetPreviousAllocation() != "" {
				replacement = a
				return true, ""
			}
		}
		return false, fmt.Sprintf("%d allocations, none a replacement", len(allocs))
	})

	t.Run("allocation", func(t *testing.T) {
		// From here on the app routes itself: the flag outlives every
		// view unless the page reloads.
		if err := chromedp.Do(browser,
			chromedp.Navigate(base+"/ui/jobs/web"),
			chromedp.Evaluate[chromedp.Void](`window.droverNoReload = true`),
		); err != nil {
			t.Fatal(err)
		}
		link := fmt.Sprintf(`#allocations tr[data-alloc=%q] a`, alloc.GetId())
		waitJS(browser, t, "the allocation's link and the job's evaluations",
			fmt.Sprintf(`!!document.querySelector('%s') && !!document.querySelector('#job-evals tbody tr a[href^="/ui/evaluations/"]')`, link))
		click(browser, t, link)
		waitJS(browser, t, "the allocation running on its ready node",
			fmt.Sprintf(`document.querySelector('#alloc-history tr[data-state="now"] .status')?.textContent === 'running' &&
			 !!document.querySelector('#alloc-history tr[data-state="created"]') &&
			 !!document.querySelector('#alloc-node a[href="/ui/nodes/%s"]') &&
			 document.querySelector('#alloc-node .status')?.textContent === 'ready'`, alloc.GetNodeId()))
		screenshot(browser, t, "allocation")
	})

	t.Run("evaluations", func(t *testing.T) {
		click(browser, t, `nav a[href="/ui/evaluations"]`)
		waitJS(browser, t, "big's blocked evaluation listed",
			fmt.Sprintf(`!!document.querySelector('#evals tr[data-eval=%q]')`, blocked.GetId()))
		screenshot(browser, t, "evaluations")

		if err := chromedp.Do(browser, chromedp.SendKeys(chromedp.CSS(`input[type="search"]`), "blocked")); err != nil {
			t.Fatal(err)
		}
		waitJS(browser, t, "only blocked evaluations listed",
			`[...document.querySelectorAll('#evals tbody tr')].every((tr) => tr.querySelector('.status').textContent === 'blocked') &&
			 document.querySelectorAll('#evals tbody tr').length === 1`)
	})

	t.Run("evaluation", func(t *testing.T) {
		click(browser, t, fmt.Sprintf(`#evals tr[data-eval=%q] a`, blocked.GetId()))
		group := big.GetTaskGroups()[0].GetName()
		waitJS(browser, t, "the blocked evaluation and why it blocked",
			fmt.Sprintf(`document.querySelector('#eval-status .status')?.textContent === 'blocked' &&
			 !!document.querySelector('.placement[data-group=%q]')`, group))
		screenshot(browser, t, "evaluation")

		// The counts are those of the evaluation the page names: the one
		// that left this one blocked, or this one after a retry.
		from, err := chromedp.Run(browser, chromedp.Evaluate[string](
			`document.querySelector('#eval-failures-from a')?.title || ''`))
		if err != nil {
			t.Fatal(err)
		}
		if from == "" {
			from = blocked.GetId()
		}
		shown, err := chromedp.Run(browser, chromedp.Evaluate[placementCounts](shownCounts(group)))
		if err != nil {
			t.Fatal(err)
		}
		var f *droverv1.PlacementFailure
		var resp droverv1.GetEvaluationResponse
		getHTTP(ctx, t, addr, "/v1/evaluation/"+from, &resp)
		for _, pf := range resp.GetEvaluation().GetPlacementFailures() {
			if pf.GetTaskGroup() == group {
				f = pf
			}
		}
		if len(f.GetFilteredBy()) == 0 || len(f.GetExhaustedBy()) == 0 {
			t.Fatalf("evaluation %s: placement failure %v, want nodes both filtered and exhausted", from, f)
		}
		want := placementCounts{
			Evaluated: f.GetNodesEvaluated(), Filtered: f.GetNodesFiltered(), Exhausted: f.GetNodesExhausted(),
			FilteredBy: f.GetFilteredBy(), ExhaustedBy: f.GetExhaustedBy(),
		}
		if !reflect.DeepEqual(shown, want) {
			t.Errorf("the page shows %+v, the API says %+v", shown, want)
		}
	})

	t.Run("live", func(t *testing.T) {
		// Two steps back in the page's history (job, allocation,
		// evaluations, evaluation) is the allocation: the same page, so
		// the same event stream.
		if err := chromedp.Do(browser, chromedp.Evaluate[chromedp.Void](`history.go(-2)`)); err != nil {
			t.Fatal(err)
		}
		waitJS(browser, t, "the allocation running",
			`document.querySelector('#alloc-client .status')?.textContent === 'running'`)
		// The stream says it is live only once a batch came: a write
		// proves it is subscribed before the one the test watches.
		probe := mock.Job(1)
		probe.Id, probe.Name = "probe", "probe"
		probe.Constraints = []*droverv1.Constraint{classIs("standard")}
		if _, err := registerJob(ctx, leader.Conn(), probe, ""); err != nil {
			t.Fatal(err)
		}
		waitJS(browser, t, "the event stream live", `!!document.querySelector('#live.s-live')`)
		a, err := callHTTP(ctx, addr, "DELETE", "/v1/job/web", nil, nil)
		if err != nil || a.status != 200 {
			t.Fatalf("DELETE /v1/job/web: %d %s %v", a.status, a.body, err)
		}
		waitJS(browser, t, "the allocation stopped and complete without a reload",
			`(document.getElementById('alloc-desired')?.textContent || '').startsWith('stop') &&
			 document.querySelector('#alloc-client .status')?.textContent === 'complete' &&
			 window.droverNoReload === true`)
	})

	t.Run("reschedule", func(t *testing.T) {
		failed := replacement.GetPreviousAllocation()
		if err := chromedp.Do(browser, chromedp.Navigate(base+"/ui/allocations/"+replacement.GetId())); err != nil {
			t.Fatal(err)
		}
		previous := `#alloc-trail [data-field="previous"] a`
		waitJS(browser, t, "the replacement's trail back to the failed allocation",
			fmt.Sprintf(`document.querySelector('%s')?.getAttribute('href') === '/ui/allocations/%s' &&
			 !!document.querySelector('#alloc-reschedules tbody tr a[href="/ui/allocations/%s"]')`, previous, failed, failed))
		click(browser, t, previous)
		waitJS(browser, t, "the failed allocation, replaced by the other",
			fmt.Sprintf(`document.querySelector('#alloc-client .status')?.textContent === 'failed' &&
			 document.querySelector('#alloc-trail [data-field="next"] a')?.getAttribute('href') === '/ui/allocations/%s'`, replacement.GetId()))
	})

	// Let the pages' last requests and events land before looking.
	if err := chromedp.Do(browser, chromedp.Navigate("about:blank")); err != nil {
		t.Fatal(err)
	}
	errs.check(t)
}
