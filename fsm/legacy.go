package fsm

import (
	droverv1 "github.com/droverhq/drover/proto/drover/v1"
)

// Releases before 0.3 wrote every duration as int64 nanoseconds, in fields
// now renamed <name>_ns; each has a google.protobuf.Duration field of its
// own now. Their raft entries and snapshot records (a data dir, a backup)
// are upgraded here, the one place old data enters the state store, so
// that the store, the scheduler, validation and the API only ever see the
// new fields (droverv1's UpgradeLegacyDurations methods).

// upgradeLegacy moves the legacy durations of a decoded raft entry or
// snapshot record into their Duration fields, and reports whether it held
// any. Messages without durations are left alone.
func upgradeLegacy(msg any) bool {
	switch m := msg.(type) {
	case *droverv1.JobRegisterEntry:
		return m.GetJob().UpgradeLegacyDurations()
	case *droverv1.DeploymentStatusUpdateEntry:
		return m.GetRevert().GetJob().UpgradeLegacyDurations()
	case *droverv1.PlanResultEntry:
		changed := m.GetDeployment().UpgradeLegacyDurations()
		for _, a := range m.GetAllocations() {
			if a.UpgradeLegacyDurations() {
				changed = true
			}
		}
		return changed
	case *droverv1.Job:
		return m.UpgradeLegacyDurations()
	case *droverv1.Allocation:
		return m.UpgradeLegacyDurations()
	case *droverv1.Deployment:
		return m.UpgradeLegacyDurations()
	}
	return false
}
