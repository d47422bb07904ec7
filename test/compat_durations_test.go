package test_test

import (
	"archive/tar"
	"compress/gzip"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"google.golang.org/protobuf/types/known/durationpb"

	droverv1 "github.com/droverhq/drover/proto/drover/v1"
	"github.com/droverhq/drover/test/cluster"
)

// compatDir holds a data dir and a backup written by the release before
// durations became google.protobuf.Duration, when they were int64
// nanoseconds; gen.sh there says how they were made and what they hold.
const compatDir = "testdata/compat-durations"

// TestCompatDurations checks that what a release before 0.3 wrote is read
// correctly after the durations became google.protobuf.Duration: a server
// started on its data dir (raft log entries, through the FSM's decoding)
// and a fresh cluster that restores its backup (snapshot records) both show
// every duration in its new field, with the value written, and nothing
// left in the legacy nanosecond fields; and the backup still inspects.
func TestCompatDurations(t *testing.T) {
	t.Run("data dir", func(t *testing.T) {
		ctx := within(t, testContext(t), time.Minute)
		// No schedulers: the old evaluations must not change what is
		// compared.
		c := cluster.New(t, droverBin, 1, cluster.Bootstrap(), cluster.ServerIDFromDataDir(),
			cluster.Args("-num-schedulers", "0"),
			cluster.BeforeFirstStart(func(s *cluster.Server) {
				if err := untarDataDir(filepath.Join(compatDir, "datadir.tar.gz"), s.DataDir()); err != nil {
					t.Fatal(err)
				}
			}))
		checkCompatDurations(ctx, t, c.WaitLeader(ctx))
	})
	t.Run("backup", func(t *testing.T) {
		ctx := within(t, testContext(t), time.Minute)
		c := cluster.New(t, droverBin, 1, cluster.Bootstrap(), cluster.Args("-num-schedulers", "0"))
		leader := c.WaitLeader(ctx)
		runCLI(ctx, t, droverBin, "operator", "snapshot", "restore", "-address", leader.RPCAddr(), filepath.Join(compatDir, "backup.snap"))
		checkCompatDurations(ctx, t, leader)
	})
	t.Run("inspect", func(t *testing.T) {
		ctx := within(t, testContext(t), time.Minute)
		out := runCLI(ctx, t, droverBin, "operator", "snapshot", "inspect", filepath.Join(compatDir, "backup.snap"))
		for _, want := range []string{"= verified", "jobs ", "allocs ", "deployments "} {
			if !strings.Contains(out, want) {
				t.Errorf("snapshot inspect of the old backup prints no %q:\n%s", want, out)
			}
		}
	})
}

// durationCheck is one duration read back: its new field, its legacy
// nanosecond field, and the value written.
type durationCheck struct {
	field  string
	got    *durationpb.Duration
	legacy int64
	want   time.Duration
}

// checkCompatDurations reads the fixture's objects through s's API and
// checks each duration gen.sh wrote (see flaky.json and rollout.json).
func checkCompatDurations(ctx context.Context, t *testing.T, s *cluster.Server) {
	t.Helper()
	ctx, cancel := context.WithTimeout(ctx, callTimeout)
	defer cancel()
	jobs := droverv1.NewJobServiceClient(s.Conn())
	var checks []durationCheck

	for _, id := range []string{"flaky", "rollout"} {
		var got []*droverv1.Job
		job, err := jobs.Get(ctx, &droverv1.GetJobRequest{JobId: id})
		if err != nil {
			t.Fatalf("job %s: %v", id, err)
		}
		got = append(got, job.GetJob())
		versions, err := jobs.Versions(ctx, &droverv1.JobVersionsRequest{JobId: id})
		if err != nil {
			t.Fatalf("versions of job %s: %v", id, err)
		}
		for _, v := range versions.GetVersions() {
			got = append(got, v.GetJob())
		}
		for i, j := range got {
			checks = append(checks, jobDurations(fmt.Sprintf("job %s (%d)", id, i), j)...)
		}
	}

	allocs, err := jobs.Allocations(ctx, &droverv1.ListJobAllocationsRequest{JobId: "flaky"})
	if err != nil {
		t.Fatalf("allocations of job flaky: %v", err)
	}
	events := 0
	for _, a := range allocs.GetAllocations() {
		for i, e := range a.GetRescheduleTracker().GetEvents() {
			events++
			checks = append(checks, durationCheck{fmt.Sprintf("alloc %s reschedule event %d delay", a.GetId(), i),
				e.GetDelay(), e.GetDelayNs(), 2 * time.Second})
		}
	}
	if events == 0 {
		t.Errorf("no allocation of job flaky has a reschedule event; the fixture has one")
	}

	deployments := droverv1.NewDeploymentServiceClient(s.Conn())
	for _, d := range []struct {
		job, group string
		want       time.Duration
	}{{"rollout", "web", 7 * time.Minute}, {"flaky", "app", droverv1.DefaultUpdateProgressDeadline}} {
		resp, err := deployments.List(ctx, &droverv1.ListDeploymentsRequest{JobId: d.job})
		if err != nil {
			t.Fatalf("deployments of job %s: %v", d.job, err)
		}
		if len(resp.GetDeployments()) == 0 {
			t.Errorf("job %s has no deployment; the fixture has one", d.job)
		}
		for _, dep := range resp.GetDeployments() {
			g := dep.GetGroups()[d.group]
			checks = append(checks, durationCheck{fmt.Sprintf("deployment %s group %s progress_deadline", dep.GetId(), d.group),
				g.GetProgressDeadline(), g.GetProgressDeadlineNs(), d.want})
		}
	}

	for _, c := range checks {
		if c.got == nil || c.got.AsDuration() != c.want || c.legacy != 0 {
			t.Errorf("%s = %v (legacy nanoseconds %d), want %s (legacy 0)", c.field, c.got.AsDuration(), c.legacy, c.want)
		}
	}
	t.Logf("%d durations checked", len(checks))
}

// jobDurations lists the durations of the fixture's job j (flaky.json sets
// them all; rollout.json none but its update block's).
func jobDurations(what string, j *droverv1.Job) []durationCheck {
	tg := j.GetTaskGroups()[0]
	if j.GetId() == "rollout" {
		return []durationCheck{{what + " update.progress_deadline", tg.GetUpdate().GetProgressDeadline(), 0, 7 * time.Minute}}
	}
	rp := tg.GetReschedulePolicy()
	return []durationCheck{
		{what + " max_client_disconnect", tg.GetMaxClientDisconnect(), tg.GetMaxClientDisconnectNs(), 5 * time.Minute},
		{what + " stop_after_client_disconnect", tg.GetStopAfterClientDisconnect(), tg.GetStopAfterClientDisconnectNs(), 3 * time.Minute},
		{what + " reschedule_policy.interval", rp.GetInterval(), rp.GetIntervalNs(), 90 * time.Minute},
		{what + " reschedule_policy.delay", rp.GetDelay(), rp.GetDelayNs(), 2 * time.Second},
		{what + " reschedule_policy.max_delay", rp.GetMaxDelay(), rp.GetMaxDelayNs(), 10 * time.Minute},
	}
}

// untarDataDir unpacks the fixture's data dir (a tar.gz of data/...) into
// dir.
func untarDataDir(archive, dir string) error {
	f, err := os.Open(archive)
	if err != nil {
		return err
	}
	defer f.Close()
	gz, err := gzip.NewReader(f)
	if err != nil {
		return fmt.Errorf("%s: %w", archive, err)
	}
	tr := tar.NewReader(gz)
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil {
			return fmt.Errorf("%s: %w", archive, err)
		}
		rel, ok := strings.CutPrefix(filepath.Clean(h.Name), "data")
		if !ok || strings.Contains(rel, "..") {
			return fmt.Errorf("%s: unexpected entry %q", archive, h.Name)
		}
		path := filepath.Join(dir, rel)
		switch h.Typeflag {
		case tar.TypeDir:
			if err := os.MkdirAll(path, 0o700); err != nil {
				return err
			}
		case tar.TypeReg:
			if err := writeFileFrom(path, tr); err != nil {
				return err
			}
		}
	}
}

// writeFileFrom writes what r holds to a new file at path.
func writeFileFrom(path string, r io.Reader) error {
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return err
	}
	out, err := os.OpenFile(path, os.O_CREATE|os.O_WRONLY|os.O_TRUNC, 0o600)
	if err != nil {
		return err
	}
	if _, err := io.Copy(out, r); err != nil {
		out.Close()
		return err
	}
	return out.Close()
}
