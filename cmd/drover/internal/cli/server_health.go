package cli

import (
	"fmt"
	"io"
	"strings"

	droverv1 "github.com/droverhq/drover/proto/drover/v1"
)

// exitUnhealthy is the exit code of a health report that found the
// cluster unhealthy, after printing the report as usual; the same code as
// a failed call, so `drover server members || alert` catches both.
const exitUnhealthy = 1

// clusterHealthError is the error `server members` ends with when the
// cluster is unhealthy, or nil. Unhealthy is the leader's autopilot
// verdict, the report's "Cluster healthy" line: some server of the raft
// configuration failed its last health check (not answering, out of
// contact with the leader, on another term, too far behind), or no
// verdict exists (no leader, or autopilot has not checked yet). A row
// alone saying unhealthy (a server that joined since the last check,
// every -autopilot-update-interval) does not decide it. The servers
// marked unhealthy, with why, are printed to w.
func clusterHealthError(w io.Writer, resp *droverv1.ServerMembersResponse) error {
	if resp.GetHealthy() {
		return nil
	}
	var reasons []string
	for _, s := range resp.GetServers() {
		if s.GetHealthy() {
			continue
		}
		why := s.GetError()
		if why == "" {
			why = "unhealthy"
		}
		reasons = append(reasons, fmt.Sprintf("%s (%s)", s.GetId(), why))
	}
	msg := "the cluster is unhealthy"
	if len(reasons) > 0 {
		msg += ": " + strings.Join(reasons, ", ")
	}
	fmt.Fprintf(w, "Error: %s\n", msg)
	return &ExitCodeError{Code: exitUnhealthy, Err: &reportedError{msg: msg}}
}
