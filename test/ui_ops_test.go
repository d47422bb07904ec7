package test_test

import (
	"fmt"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"google.golang.org/protobuf/proto"

	droverv1 "github.com/droverhq/drover/proto/drover/v1"
	"github.com/droverhq/drover/test/cluster"
)

// TestUIOperations drives the operator's actions in the UI against a
// server with simulated agents that report their allocations' health: a
// canary deployment's progress bar advances as the agents report, and the
// canary is promoted from the page; a deployment is failed and the job
// reverted to its first version from its versions list, whose diffs show
// what changed; then a node is drained from its view and its allocations
// move away, all without a reload.
func TestUIOperations(t *testing.T) {
	ctx := within(t, testContext(t), 3*time.Minute)
	errs := &consoleErrors{}
	browser := startBrowser(ctx, t, errs)

	c := cluster.New(t, droverBin, 1, cluster.Bootstrap(), httpArgs())
	leader := c.WaitLeader(ctx)
	fleet := startSimFleet(ctx, t, c, 4, simAllocs)
	waitFleetReady(ctx, t, fleet)
	dc := newDeployClients(leader.Conn())
	base := "http://" + leader.Info().HTTPAddr

	job := rolloutJob("web")
	job.TaskGroups[0].Count = 6
	job.TaskGroups[0].Update.Canary = proto.Int32(1)
	dc.register(ctx, t, job)
	dc.waitStatus(ctx, t, job.GetId(), 0, droverv1.DeploymentStatus_DEPLOYMENT_STATUS_SUCCESSFUL)

	if err := chromedp.Do(browser,
		chromedp.Navigate(base+"/ui/jobs/web"),
		chromedp.Evaluate[chromedp.Void](`window.droverNoReload = true`),
	); err != nil {
		t.Fatal(err)
	}
	noReload := ` && window.droverNoReload === true`
	waitJS(browser, t, "version 0's deployment successful, 6 of 6 healthy",
		`document.querySelector('#deployment-status .status')?.textContent === 'successful' &&
		 document.querySelector('#deployment-groups [data-field="healthy"]')?.textContent === '6'`)

	t.Run("promote", func(t *testing.T) {
		v1 := nextVersion(job)
		dc.register(ctx, t, v1)
		// The canary's health moves the bar from 0 to 1 of 6; the rest
		// waits for the promotion.
		waitJS(browser, t, "version 1's canary healthy, waiting for its promotion",
			`document.querySelector('#deployment[data-version="1"] .status')?.textContent === 'running' &&
			 document.querySelector('#deployment-groups [data-field="healthy"]')?.textContent === '1' &&
			 document.querySelector('#deployment-groups progress')?.value === 1 &&
			 !!document.querySelector('[data-action="promote"] button')`+noReload)
		screenshot(browser, t, "deployment")
		confirmAction(browser, t, `[data-action="promote"]`)
		waitJS(browser, t, "version 1 rolled out: 6 of 6 healthy, successful",
			`document.querySelector('#deployment-status .status')?.textContent === 'successful' &&
			 document.querySelector('#deployment-groups [data-field="healthy"]')?.textContent === '6' &&
			 document.querySelector('#deployment-groups progress')?.value === 6 && !document.querySelector('.error')`+noReload)
		// Version 1's diff names the field that changed.
		group := job.GetTaskGroups()[0].GetName()
		waitJS(browser, t, "version 1's diff",
			fmt.Sprintf(`[...document.querySelectorAll('#versions [data-version="1"] table.diff code')].some((c) => c.textContent === 'task_groups[%s].resources.memory_mb')`, group))
	})

	t.Run("fail and revert", func(t *testing.T) {
		v2 := nextVersion(nextVersion(job))
		dc.register(ctx, t, v2)
		waitJS(browser, t, "version 2's deployment waiting for its promotion",
			`!!document.querySelector('#deployment[data-version="2"]') &&
			 !!document.querySelector('[data-action="fail"] button') && !!document.querySelector('[data-action="promote"] button')`+noReload)
		confirmAction(browser, t, `[data-action="fail"]`)
		waitJS(browser, t, "version 2's deployment failed",
			`document.querySelector('#deployment-status .status')?.textContent === 'failed'`+noReload)
		confirmAction(browser, t, `#versions [data-version="0"] [data-action="revert"]`)
		waitJS(browser, t, "version 3, version 0 registered again, listed as current",
			`(document.querySelector('#versions [data-version="3"] h3')?.textContent || '').includes('current') && !document.querySelector('.error')`+noReload)
		// Version 3 replaces version 1's allocations: a canary first.
		waitJS(browser, t, "version 3's canary waiting for its promotion",
			`!!document.querySelector('#deployment[data-version="3"]') && !!document.querySelector('[data-action="promote"] button')`+noReload)
		confirmAction(browser, t, `[data-action="promote"]`)
		waitJS(browser, t, "version 3 rolled out",
			`document.querySelector('#deployment[data-version="3"] .status')?.textContent === 'successful'`+noReload)
		got, err := dc.jobs.Get(ctx, &droverv1.GetJobRequest{JobId: job.GetId()})
		if err != nil {
			t.Fatal(err)
		}
		if g, want := got.GetJob().GetTaskGroups()[0].GetResources().GetMemoryMb(), job.GetTaskGroups()[0].GetResources().GetMemoryMb(); g != want {
			t.Errorf("after the revert the job asks %d MB, want version 0's %d", g, want)
		}
		screenshot(browser, t, "job-reverted")
	})

	t.Run("drain", func(t *testing.T) {
		// The busiest node, reached through the job's allocation table.
		node, err := chromedp.Run(browser, chromedp.Evaluate[string](`(() => {
			const n = {};
			for (const tr of document.querySelectorAll('#allocations tbody tr')) {
				if (tr.lastElementChild.textContent !== 'running') continue;
				const id = tr.children[2].title;
				n[id] = (n[id] || 0) + 1;
			}
			return Object.keys(n).sort((a, b) => n[b] - n[a])[0] || '';
		})()`))
		if err != nil || node == "" {
			t.Fatalf("no node runs an allocation of web (%v)", err)
		}
		click(browser, t, fmt.Sprintf(`#allocations a[href="/ui/nodes/%s"]`, node))
		waitJS(browser, t, "the node's allocations running",
			`document.querySelectorAll('#node-allocations tr[data-on-node="yes"]').length > 0`+noReload)
		// A deadline the UI cannot read is refused before any call.
		drain := func(deadline string) {
			t.Helper()
			if err := chromedp.Do(browser,
				chromedp.Evaluate[chromedp.Void](`document.querySelector('input[name="deadline"]').value = ''`),
				chromedp.SendKeys(chromedp.CSS(`input[name="deadline"]`), deadline),
			); err != nil {
				t.Fatal(err)
			}
			confirmAction(browser, t, `[data-action="drain"]`)
		}
		drain("soon")
		waitJS(browser, t, "the deadline refused", `/"soon" is not a duration/.test(document.querySelector('[data-action="drain"] .error')?.textContent || '')`)
		click(browser, t, `[data-action="drain"] .confirm button:not([data-confirm])`)
		drain("10m")
		// The drain moves every allocation off the node, then ends; the
		// node stays ineligible.
		waitJS(browser, t, "every allocation moved off the node, the drain over",
			`document.querySelectorAll('#node-allocations tr[data-on-node="yes"]').length === 0 &&
			 !document.getElementById('drain') &&
			 document.getElementById('node-eligibility')?.textContent === 'ineligible' &&
			 [...document.querySelectorAll('#node-events td')].some((td) => /drain/i.test(td.textContent)) &&
			 !document.querySelector('.error')`+noReload)
		screenshot(browser, t, "node")
		n, err := dc.nodes.Get(ctx, &droverv1.GetNodeRequest{NodeId: node})
		if err != nil {
			t.Fatal(err)
		}
		for _, a := range n.GetAllocs() {
			if a.GetDesiredStatus() == droverv1.AllocDesiredStatus_ALLOC_DESIRED_STATUS_RUN && !a.ClientTerminal() {
				t.Errorf("allocation %s still runs on the drained node %s", a.GetId(), node)
			}
		}
		dc.waitCensus(ctx, t, job.GetId(), "6 running, none on the drained node", func(c allocCensus) bool {
			return c.running == 6 && c.nodes[node] == 0
		})
	})

	if err := chromedp.Do(browser, chromedp.Navigate("about:blank")); err != nil {
		t.Fatal(err)
	}
	errs.check(t)
}
