package test_test

import (
	"fmt"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/droverhq/drover/internal/mock"
	droverv1 "github.com/droverhq/drover/proto/drover/v1"
	"github.com/droverhq/drover/test/cluster"
)

// TestUIViews drives the allocation view in headless Chromium against 1
// server and 3 simulated nodes: job web's allocation, reached from the job
// view's link, shows it running on its ready node and follows the job's
// stop without a reload. No page has a JavaScript error.
func TestUIViews(t *testing.T) {
	ctx := within(t, testContext(t), time.Minute)
	errs := &consoleErrors{}
	browser := startBrowser(ctx, t, errs)

	c := cluster.New(t, droverBin, 1, httpArgs())
	leader := c.WaitLeader(ctx)
	fleet := startSimFleet(ctx, t, c, 3, simAllocs)
	waitFleetReady(ctx, t, fleet)

	web := mock.Job(1)
	web.Id, web.Name = "web", "web"
	if _, err := registerJob(ctx, leader.Conn(), web, ""); err != nil {
		t.Fatal(err)
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
		waitJS(browser, t, "the allocation's link", fmt.Sprintf(`!!document.querySelector('%s')`, link))
		if err := chromedp.Do(browser, chromedp.Click(chromedp.CSS(link))); err != nil {
			t.Fatal(err)
		}
		waitJS(browser, t, "the allocation running on its ready node",
			fmt.Sprintf(`document.querySelector('#alloc-history tr[data-state="now"] .status')?.textContent === 'running' &&
			 !!document.querySelector('#alloc-history tr[data-state="created"]') &&
			 !!document.querySelector('#alloc-node a[href="/ui/nodes/%s"]') &&
			 document.querySelector('#alloc-node .status')?.textContent === 'ready'`, alloc.GetNodeId()))
		screenshot(browser, t, "allocation")
	})

	t.Run("live", func(t *testing.T) {
		// The stream says it is live only once a batch came: a write
		// proves it is subscribed before the one the test watches.
		probe := mock.Job(1)
		probe.Id, probe.Name = "probe", "probe"
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

	// Let the pages' last requests and events land before looking.
	if err := chromedp.Do(browser, chromedp.Navigate("about:blank")); err != nil {
		t.Fatal(err)
	}
	errs.check(t)
}
