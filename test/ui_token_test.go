package test_test

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/droverhq/drover/internal/mock"
	droverv1 "github.com/droverhq/drover/proto/drover/v1"
	"github.com/droverhq/drover/test/cluster"
)

// TestUIToken drives the UI against a server with ACLs: without a token
// the jobs view shows the API's refusal; with the management token typed
// into the token box it lists the jobs, the event stream connects with the
// token, and the token survives a reload in the tab's session storage.
// With a token that may only read jobs, stopping one is refused and the
// page shows why.
func TestUIToken(t *testing.T) {
	ctx := within(t, testContext(t), 2*time.Minute)
	errs := &consoleErrors{}
	browser := startBrowser(ctx, t, errs)

	c := cluster.New(t, droverBin, 1, cluster.Bootstrap(), cluster.ACL(), httpArgs())
	leader := c.WaitLeader(ctx)
	// ACL entries are written once the server has announced its release.
	poll(ctx, t, "the server announced", func() (bool, string) {
		info, err := serverInfo(ctx, leader)
		return err == nil && info.GetClusterId() != "", fmt.Sprint(err)
	})
	secret := raceBootstrap(ctx, t, leader)
	base := "http://" + leader.Info().HTTPAddr

	if err := chromedp.Do(browser, chromedp.Navigate(base+"/ui/jobs")); err != nil {
		t.Fatal(err)
	}
	waitJS(browser, t, "the API's refusal shown without a token",
		`/UNAUTHENTICATED|PERMISSION_DENIED/.test(document.querySelector('.error')?.textContent || '')`)
	// The event stream is refused too: the header says the views poll,
	// and why.
	waitJS(browser, t, "the stream's refusal in the header",
		`!!document.querySelector('#live.s-refused') && /PERMISSION_DENIED: /.test(document.getElementById('live').title)`)

	if err := chromedp.Do(browser,
		chromedp.SendKeys(chromedp.CSS("#token"), secret),
	); err != nil {
		t.Fatal(err)
	}
	click(browser, t, "form.token button")
	waitJS(browser, t, "the jobs listed with the token", `!!document.querySelector('#jobs') && !document.querySelector('.error')`)
	// The stream reads with the token too: a job registered now is listed.
	job := mock.Job(1)
	job.Id, job.Name = "tok", "tok"
	body, err := protoNames.Marshal(&droverv1.RegisterJobRequest{Job: job})
	if err != nil {
		t.Fatal(err)
	}
	if a, err := callHTTP(ctx, leader.Info().HTTPAddr, "PUT", "/v1/jobs", body, tokenHeader(secret)); err != nil || a.status != 200 {
		t.Fatalf("PUT /v1/jobs: %d %s %v", a.status, a.body, err)
	}
	listed := `!!document.querySelector('#jobs tr[data-job="tok"]') && !document.querySelector('.error')`
	waitJS(browser, t, "the job registered listed live, the stream reading with the token",
		listed+` && !!document.querySelector('#live.s-live')`)
	stored, err := chromedp.Run(browser, chromedp.Evaluate[string](`sessionStorage.getItem('drover.token')`))
	if err != nil || stored != secret {
		t.Fatalf("session storage holds %q (%v), want the token", stored, err)
	}
	if strings.Contains(base, secret) {
		t.Fatal("the token is in the address")
	}

	if err := chromedp.Do(browser, chromedp.Reload()); err != nil {
		t.Fatal(err)
	}
	waitJS(browser, t, "the jobs listed after a reload, with the stored token", listed)

	// A token that may read jobs but not write them sees the job; its
	// stop is refused with the API's reason, and the job stays.
	admin := droverv1.NewACLServiceClient(leader.Conn())
	reader := createToken(as(ctx, secret), t, admin, clientToken(applyPolicy(as(ctx, secret), t, admin, "job-reader",
		"job \"*\" { policy = \"read\" }\nevent { policy = \"read\" }\n")))
	if err := chromedp.Do(browser,
		chromedp.Evaluate[chromedp.Void](`document.getElementById('token').value = ''`),
		chromedp.SendKeys(chromedp.CSS("#token"), reader),
	); err != nil {
		t.Fatal(err)
	}
	click(browser, t, "form.token button")
	click(browser, t, `#jobs tr[data-job="tok"] a`)
	waitJS(browser, t, "the job shown to the reader", `document.getElementById('job-status')?.textContent === 'pending'`)
	confirmAction(browser, t, `[data-action="stop"]`)
	waitJS(browser, t, "the refusal and its reason shown",
		`/PERMISSION_DENIED: .*job/.test(document.querySelector('[data-action="stop"] .error')?.textContent || '')`)
	screenshot(browser, t, "refused")
	got, err := droverv1.NewJobServiceClient(leader.Conn()).Get(as(ctx, secret), &droverv1.GetJobRequest{JobId: job.GetId()})
	if err != nil || got.GetJob().GetStop() {
		t.Fatalf("the job after a refused stop: %v, %v; want it not stopped", got.GetJob(), err)
	}

	if err := chromedp.Do(browser, chromedp.Navigate("about:blank")); err != nil {
		t.Fatal(err)
	}
	errs.check(t)
}
