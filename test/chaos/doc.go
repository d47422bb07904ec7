// Package chaos is drover's fault suite: real `drover server` processes (3
// or 5) run while concurrent clients write and read registers through
// random servers and a nemesis injects faults (kill -9, SIGSTOP, network
// partitions, membership changes, full and damaged disks). After each run
// the cluster is healed and the suite checks that the history is
// linearizable (github.com/anishathalye/porcupine), that every
// acknowledged write is on every server in stale and consistent reads,
// that the servers' state digests agree, and that drover's placement
// invariants hold.
//
// A failing run writes the history (history.json), porcupine's
// visualization (history.html), the nemesis' log and every server's log
// into $DROVER_CHAOS_ARTIFACTS (default $TMPDIR/drover-chaos-artifacts),
// and names its seed; DROVER_CHAOS_SEED=<seed> reruns it. `make test` runs
// a short sweep (every fault once); `make chaos` a long one (flags
// -chaos.rounds, -chaos.hold, -chaos.seeds, -chaos.clients, -chaos.keys).
package chaos
