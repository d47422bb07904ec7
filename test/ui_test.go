package test_test

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/cdproto/cdp"
	"github.com/chromedp/cdproto/log"
	"github.com/chromedp/chromedp"

	"github.com/droverhq/drover/internal/mock"
	droverv1 "github.com/droverhq/drover/proto/drover/v1"
	"github.com/droverhq/drover/test/cluster"
)

// screenshotsEnv names the folder the browser tests write their
// screenshots to (`make ui-screenshots` sets it to docs/ui); unset, none
// are written.
const screenshotsEnv = "DROVER_UI_SCREENSHOTS"

// browserPath finds a Chromium the tests can drive: Debian's `chromium`
// (which `make chromium`, part of `make test`, installs) or another name
// for the same browser.
func browserPath() string {
	for _, name := range []string{"chromium", "chromium-browser", "google-chrome", "google-chrome-stable"} {
		if p, err := exec.LookPath(name); err == nil {
			return p
		}
	}
	return ""
}

// consoleErrors collects every JavaScript exception and console error of
// a page. Failed requests (browser log entries from the network) are not
// errors of the UI: it shows the API's refusals on purpose.
type consoleErrors struct {
	mu   sync.Mutex
	errs []string
}

// collect reads the tab's console until ctx ends.
func (c *consoleErrors) collect(ctx context.Context) {
	for m, err := range chromedp.Console(ctx) {
		if err != nil {
			return
		}
		if m.Type != chromedp.ConsoleError && !m.IsException() || m.Source == string(log.EntrySourceNetwork) {
			continue
		}
		c.mu.Lock()
		c.errs = append(c.errs, fmt.Sprintf("%s at %s:%d:%d", m, m.URL, m.Line, m.Column))
		c.mu.Unlock()
	}
}

func (c *consoleErrors) check(t *testing.T) {
	t.Helper()
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, e := range c.errs {
		t.Errorf("browser: %s", e)
	}
}

// startBrowser starts headless Chromium for the test and returns its tab's
// context; the browser ends with ctx or the test.
func startBrowser(ctx context.Context, t *testing.T, errs *consoleErrors) context.Context {
	t.Helper()
	path := browserPath()
	if path == "" {
		t.Skip("no Chromium to drive: install Debian's chromium (`make chromium` does, as root)")
	}
	opts := append(chromedp.DefaultExecAllocatorOptions[:],
		chromedp.ExecPath(path),
		chromedp.WindowSize(1280, 900),
		// The tests run as root in containers, where Chromium's sandbox
		// cannot start; the page is our own UI on loopback.
		chromedp.NoSandbox,
		chromedp.Flag("disable-dev-shm-usage", true),
		chromedp.UserDataDir(t.TempDir()),
	)
	actx, cancelAlloc := chromedp.NewExecAllocator(ctx, opts...)
	t.Cleanup(cancelAlloc)
	bctx, cancel := chromedp.NewContext(actx)
	t.Cleanup(cancel)
	// The first call starts the browser; Log.enable adds the browser's own
	// errors (a refused Content-Security-Policy, say) to the console.
	if _, err := chromedp.Call(bctx, log.Enable, cdp.Empty{}); err != nil {
		t.Fatalf("start %s: %v", path, err)
	}
	go errs.collect(bctx)
	return bctx
}

// waitJS waits until expr is true in the page, failing with what after
// the context's deadline.
func waitJS(ctx context.Context, t *testing.T, what, expr string) {
	t.Helper()
	if _, err := chromedp.Run(ctx, chromedp.Poll[chromedp.Void](expr, chromedp.WithPollingInterval(50*time.Millisecond))); err != nil {
		quick, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
		defer cancel()
		html, _ := chromedp.Run(quick, chromedp.OuterHTML(chromedp.CSS("main")))
		t.Fatalf("browser: waiting for %s: %v; the page's main:\n%s", what, err, html)
	}
}

// click waits for the element the selector names and clicks it. Finding
// and clicking are one step in the page: a mouse click at the element's
// place (chromedp.Click) misses when a live update moves the page between
// the two.
func click(ctx context.Context, t *testing.T, selector string) {
	t.Helper()
	quoted, err := json.Marshal(selector)
	if err != nil {
		t.Fatal(err)
	}
	waitJS(ctx, t, "an element to click: "+selector, fmt.Sprintf(
		`(() => { const e = document.querySelector(%s); if (!e) return false; e.click(); return true; })()`, quoted))
}

// confirmAction clicks the button of the action the selector names
// (`[data-action="stop"]`, say), then its confirmation.
func confirmAction(ctx context.Context, t *testing.T, action string) {
	t.Helper()
	click(ctx, t, action+` button`)
	click(ctx, t, action+` [data-confirm]`)
}

// screenshot saves the page as name.png in $DROVER_UI_SCREENSHOTS, if set.
func screenshot(ctx context.Context, t *testing.T, name string) {
	t.Helper()
	dir := os.Getenv(screenshotsEnv)
	if dir == "" {
		return
	}
	png, err := chromedp.Run(ctx, chromedp.FullScreenshot(100))
	if err != nil {
		t.Fatalf("screenshot %s: %v", name, err)
	}
	if err := os.WriteFile(filepath.Join(dir, name+".png"), png, 0o644); err != nil {
		t.Fatal(err)
	}
}

// TestUI drives the web UI in headless Chromium against 3 servers and 4
// simulated nodes running allocations: the cluster view shows the servers
// and the leader; the nodes view the ready nodes, and one is marked
// ineligible through its confirmed action; the jobs view lists a job, and
// one registered through the API appears without a reload; the job view
// counts the running allocations and stops the job; an API error is shown;
// and no page has a JavaScript error.
func TestUI(t *testing.T) {
	ctx := within(t, testContext(t), 3*time.Minute)
	errs := &consoleErrors{}
	browser := startBrowser(ctx, t, errs)

	c := cluster.New(t, droverBin, 3, httpArgs())
	leader := c.WaitLeader(ctx)
	waitRecorded(ctx, t, c)
	fleet := startSimFleet(ctx, t, c, 4, simAllocs)
	waitFleetReady(ctx, t, fleet)
	web := mock.Job(2)
	web.Id, web.Name = "web", "web"
	if _, err := registerJob(ctx, leader.Conn(), web, ""); err != nil {
		t.Fatal(err)
	}
	// Any server serves the UI; a follower's answers go through the
	// leader like every API call.
	base := "http://" + c.Others(leader)[0].Info().HTTPAddr

	t.Run("cluster", func(t *testing.T) {
		if err := chromedp.Do(browser, chromedp.Navigate(base+"/ui/")); err != nil {
			t.Fatal(err)
		}
		waitJS(browser, t, "3 servers and a leader",
			`document.querySelectorAll('#servers tbody tr').length === 3 &&
			 !['', 'none'].includes(document.getElementById('cluster-leader')?.textContent)`)
		leaderID, err := chromedp.Run(browser, chromedp.Text(chromedp.CSS("#cluster-leader")))
		if err != nil {
			t.Fatal(err)
		}
		if leaderID != leader.ID() {
			t.Logf("the page names leader %q; the test's leader is %s (leadership may have moved)", leaderID, leader)
		}
		screenshot(browser, t, "cluster")
	})

	t.Run("nodes", func(t *testing.T) {
		click(browser, t, `nav a[href="/ui/nodes"]`)
		waitJS(browser, t, "4 ready nodes",
			`document.querySelectorAll('#nodes tbody tr').length === 4 &&
			 [...document.querySelectorAll('#nodes td[data-field="status"]')].every((td) => td.textContent === 'ready')`)
		screenshot(browser, t, "nodes")

		// An action asks first, then acts; the row follows the node's
		// event.
		id, err := chromedp.Run(browser, chromedp.Evaluate[string](`document.querySelector('#nodes tbody tr').dataset.node`))
		if err != nil {
			t.Fatal(err)
		}
		row := fmt.Sprintf(`#nodes tr[data-node=%q]`, id)
		click(browser, t, row+` [data-action="eligibility"] button`)
		waitJS(browser, t, "the question", fmt.Sprintf(`!!document.querySelector('%s [data-confirm]')`, row))
		click(browser, t, row+` [data-confirm]`)
		waitJS(browser, t, "the node ineligible",
			fmt.Sprintf(`document.querySelector('%s td[data-field="eligibility"]')?.textContent === 'ineligible' && !document.querySelector('.error')`, row))
	})

	t.Run("jobs", func(t *testing.T) {
		// A link in the page, not a navigation: the app routes itself.
		click(browser, t, `nav a[href="/ui/jobs"]`)
		if err := chromedp.Do(browser,
			chromedp.Evaluate[chromedp.Void](`window.droverNoReload = true`),
		); err != nil {
			t.Fatal(err)
		}
		waitJS(browser, t, "job web listed", `!!document.querySelector('#jobs tr[data-job="web"]')`)
		waitJS(browser, t, "the event stream connected", `!!document.querySelector('#live.s-live')`)

		api := mock.Job(1)
		api.Id, api.Name = "api", "api"
		body, err := protoNames.Marshal(&droverv1.RegisterJobRequest{Job: api})
		if err != nil {
			t.Fatal(err)
		}
		a, err := callHTTP(ctx, strings.TrimPrefix(base, "http://"), "PUT", "/v1/jobs", body, nil)
		if err != nil || a.status != 200 {
			t.Fatalf("PUT /v1/jobs: %d %s %v", a.status, a.body, err)
		}
		waitJS(browser, t, "job api listed without a reload",
			`!!document.querySelector('#jobs tr[data-job="api"]') && window.droverNoReload === true`)
		screenshot(browser, t, "jobs")
	})

	t.Run("job", func(t *testing.T) {
		click(browser, t, `#jobs tr[data-job="web"] a`)
		group := web.GetTaskGroups()[0].GetName()
		waitJS(browser, t, "2 running allocations of web",
			fmt.Sprintf(`document.querySelector('#groups tr[data-group=%q] td[data-status="running"]')?.textContent === '2' &&
			 document.querySelectorAll('#allocations tbody tr').length === 2`, group))
		screenshot(browser, t, "job")

		confirmAction(browser, t, `[data-action="stop"]`)
		waitJS(browser, t, "web stopped and its allocations not running",
			`document.getElementById('job-status')?.textContent === 'stopped' &&
			 !document.querySelector('.error') &&
			 [...document.querySelectorAll('#allocations tbody tr')].every((tr) => tr.lastElementChild.textContent !== 'running')`)
	})

	t.Run("error", func(t *testing.T) {
		if err := chromedp.Do(browser, chromedp.Navigate(base+"/ui/jobs/nope")); err != nil {
			t.Fatal(err)
		}
		waitJS(browser, t, "the API's NOT_FOUND shown",
			`(document.querySelector('.error')?.textContent || '').includes('NOT_FOUND')`)
	})

	// Let the pages' last requests and events land before looking.
	if err := chromedp.Do(browser, chromedp.Navigate("about:blank")); err != nil {
		t.Fatal(err)
	}
	errs.check(t)
}
