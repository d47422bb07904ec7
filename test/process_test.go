package test_test

import (
	"context"
	"fmt"
	"os"
	"testing"
	"time"

	"github.com/droverhq/drover/test/cluster"
)

// droverBin is the drover binary built once for the tests of this package.
var droverBin string

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "drover-test-bin-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	code := 1
	if droverBin, err = cluster.Build(dir); err != nil {
		fmt.Fprintln(os.Stderr, err)
	} else {
		code = m.Run()
	}
	_ = os.RemoveAll(dir)
	os.Exit(code)
}

// testContext bounds one test's waits and calls.
func testContext(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	t.Cleanup(cancel)
	return ctx
}
