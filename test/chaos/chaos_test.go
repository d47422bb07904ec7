package chaos

import (
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"github.com/droverhq/drover/test/cluster"
)

// The sweep's size. `make test` runs every fault once, briefly; `make
// chaos` passes longer holds, more rounds and several seeds.
var (
	rounds  = flag.Int("chaos.rounds", 1, "times each fault is injected and healed per seed")
	holdFor = flag.Duration("chaos.hold", 4*time.Second, "how long a fault stays in place (pauses last 1s up to this)")
	calm    = flag.Duration("chaos.calm", 2*time.Second, "how long the clients run between faults")
	seeds   = flag.Int("chaos.seeds", 1, "seeds per fault (each a fresh cluster)")
	clients = flag.Int("chaos.clients", 16, "concurrent clients")
	keys    = flag.Int("chaos.keys", 4, "registers of each kind (jobs, nodes)")
)

// bin is the drover binary built once for the suite.
var bin string

func TestMain(m *testing.M) {
	flag.Parse()
	dir, err := os.MkdirTemp("", "drover-chaos-bin-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	code := 1
	if bin, err = cluster.Build(dir); err != nil {
		fmt.Fprintln(os.Stderr, err)
	} else {
		code = m.Run()
	}
	_ = os.RemoveAll(dir)
	os.Exit(code)
}

// TestChaos runs every fault against a real cluster while clients write and
// read, and checks the history and the servers afterwards. DROVER_CHAOS_SEED
// reruns one seed.
func TestChaos(t *testing.T) {
	base := uint64(time.Now().UnixNano())
	fixed := false
	if s := os.Getenv("DROVER_CHAOS_SEED"); s != "" {
		v, err := strconv.ParseUint(s, 10, 64)
		if err != nil {
			t.Fatalf("DROVER_CHAOS_SEED=%q: %v", s, err)
		}
		base, fixed = v, true
	}
	artifacts := os.Getenv("DROVER_CHAOS_ARTIFACTS")
	if artifacts == "" {
		artifacts = filepath.Join(os.TempDir(), "drover-chaos-artifacts")
	}
	for _, f := range Faults() {
		t.Run(f.Name, func(t *testing.T) {
			if f.Requires != nil {
				if why := f.Requires(); why != "" {
					t.Skipf("%s: %s", f.Name, why)
				}
			}
			n := *seeds
			if fixed {
				n = 1
			}
			for i := range n {
				seed := base + uint64(i)
				t.Run("seed="+strconv.FormatUint(seed, 10), func(t *testing.T) {
					t.Logf("fault %s, seed %d (rerun with DROVER_CHAOS_SEED=%d)", f.Name, seed, seed)
					Run(t, f, Config{
						Bin: bin, Seed: seed, Rounds: *rounds, Hold: *holdFor, Calm: *calm,
						Clients: *clients, Keys: *keys, Artifacts: artifacts, CheckTimeout: time.Minute,
					})
				})
			}
		})
	}
}
