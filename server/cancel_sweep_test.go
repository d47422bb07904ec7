package server

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"testing"

	droverv1 "github.com/droverhq/drover/proto/drover/v1"
)

// TestCancelSweepKeepsFailedBatch runs sweeps over batches handed over
// once each (as the broker and the blocked set hand them) while some
// writes fail, and checks that every cancellation is written in the end,
// in the order handed over, and that a failed batch is written again
// before anything new is taken.
func TestCancelSweepKeepsFailedBatch(t *testing.T) {
	errFull := errors.New("data dir is full")
	cases := []struct {
		name string
		// batches are what take hands over, one per call, then nothing.
		batches int
		// fails says, per write attempt in order, whether it fails.
		fails []bool
		// sweeps is how many sweeps run.
		sweeps int
		// wantSweepErrs is how many sweeps return an error.
		wantSweepErrs int
	}{
		{name: "no failure", batches: 3, sweeps: 1},
		{name: "first write fails", batches: 2, fails: []bool{true}, sweeps: 2, wantSweepErrs: 1},
		{name: "a write fails twice", batches: 3, fails: []bool{false, true, true}, sweeps: 3, wantSweepErrs: 2},
		{name: "nothing to write", batches: 0, sweeps: 2},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			var handed, written []string
			taken := 0
			attempt := 0
			sweep := &cancelSweep{
				take: func() []*droverv1.Evaluation {
					if taken == tc.batches {
						return nil
					}
					taken++
					var batch []*droverv1.Evaluation
					for i := range 2 {
						id := fmt.Sprintf("eval-%d-%d", taken, i)
						handed = append(handed, id)
						batch = append(batch, &droverv1.Evaluation{Id: id, Status: droverv1.EvalStatus_EVAL_STATUS_CANCELED})
					}
					return batch
				},
				write: func(_ context.Context, batch []*droverv1.Evaluation) error {
					attempt++
					if attempt <= len(tc.fails) && tc.fails[attempt-1] {
						return errFull
					}
					for _, ev := range batch {
						written = append(written, ev.GetId())
					}
					return nil
				},
			}
			sweepErrs := 0
			for range tc.sweeps {
				if err := sweep.run(t.Context()); err != nil {
					if !errors.Is(err, errFull) {
						t.Fatalf("sweep returned %v", err)
					}
					sweepErrs++
				}
			}
			if sweepErrs != tc.wantSweepErrs {
				t.Errorf("%d sweeps failed, want %d", sweepErrs, tc.wantSweepErrs)
			}
			if !slices.Equal(written, handed) {
				t.Errorf("written %v, handed over %v", written, handed)
			}
			if len(sweep.unwritten) != 0 {
				t.Errorf("%d cancellations left unwritten", len(sweep.unwritten))
			}
		})
	}
}
