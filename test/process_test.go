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

// childBinEnv, set, makes the test binary a child of a test that runs it
// again (TestNetnsParentDies): it uses the drover binary its parent built.
const childBinEnv = "DROVER_TEST_CHILD_BIN"

func TestMain(m *testing.M) {
	if bin := os.Getenv(childBinEnv); bin != "" {
		droverBin = bin
		os.Exit(m.Run())
	}
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
