package test_test

import (
	"fmt"
	"io"
	"net/http"
	"testing"

	"github.com/droverhq/drover/internal/mock"
	droverv1 "github.com/droverhq/drover/proto/drover/v1"
	"github.com/droverhq/drover/test/cluster"
)

// BenchmarkJobsList compares listing 100 jobs over HTTP (GET /v1/jobs,
// JSON, through the in-process gRPC connection and every interceptor)
// with the same JobService.List over gRPC, on one server process, one
// caller at a time: per-call p50 and p99. The HTTP client reads the whole
// body but does not decode it; the gRPC client decodes the answer.
//
//	go test -run '^$' -bench JobsList -benchtime 2000x -count 5 ./test/
func BenchmarkJobsList(b *testing.B) {
	c := cluster.New(b, droverBin, 1, cluster.Bootstrap(), httpArgs())
	ctx := b.Context()
	s := c.WaitLeader(ctx)
	for i := range 100 {
		job := mock.Job(1)
		job.Id, job.Name = fmt.Sprintf("job-%03d", i), fmt.Sprintf("job-%03d", i)
		if _, err := registerJob(ctx, s.Conn(), job, ""); err != nil {
			b.Fatal(err)
		}
	}
	c.WaitConverged(ctx)

	b.Run("api=grpc", func(b *testing.B) {
		client := droverv1.NewJobServiceClient(s.Conn())
		reportLatencies(b, runCalls(b, b.N, 1, "lists/s", func(int) error {
			resp, err := client.List(ctx, &droverv1.ListJobsRequest{})
			if err == nil && len(resp.GetJobs()) != 100 {
				err = fmt.Errorf("%d jobs listed, want 100", len(resp.GetJobs()))
			}
			return err
		}))
	})
	b.Run("api=http", func(b *testing.B) {
		url := "http://" + s.Info().HTTPAddr + "/v1/jobs"
		client := &http.Client{}
		reportLatencies(b, runCalls(b, b.N, 1, "lists/s", func(int) error {
			req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
			if err != nil {
				return err
			}
			resp, err := client.Do(req)
			if err != nil {
				return err
			}
			defer resp.Body.Close()
			if _, err := io.Copy(io.Discard, resp.Body); err != nil {
				return err
			}
			if resp.StatusCode != http.StatusOK {
				return fmt.Errorf("GET /v1/jobs: %s", resp.Status)
			}
			return nil
		}))
	})
}
