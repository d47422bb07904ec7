package droverv1

import (
	"time"

	"google.golang.org/protobuf/types/known/durationpb"
)

// Releases before 0.3 kept every duration as int64 nanoseconds. Those fields
// keep their numbers, renamed <name>_ns and deprecated, so that raft logs,
// snapshots and backups written then still decode; each duration now has a
// google.protobuf.Duration field of its own, which is what protojson,
// grpcurl and job files show ("30s").
//
// Stored objects are upgraded once, where old data enters a server (the
// FSM's entry decoding and snapshot reader): the UpgradeLegacyDurations
// methods below move a legacy value into the new field and clear the legacy
// one, so that validation and every reader only ever look at the new
// fields. Requests from older clients are read through the Effective*
// methods, which fall back to the legacy field.

// upgradeDuration returns the value to store in a Duration field whose
// legacy nanosecond field holds ns: d when it is set (a newer writer), else
// ns as a Duration, nil when ns is zero (unset, as before). changed reports
// whether a legacy value was found.
func upgradeDuration(d *durationpb.Duration, ns int64) (_ *durationpb.Duration, changed bool) {
	if ns == 0 {
		return d, false
	}
	if d != nil {
		return d, true
	}
	return durationpb.New(time.Duration(ns)), true
}

// legacyDuration is d as a time.Duration, or ns when d is unset: the value a
// request from a client built before 0.3 meant.
func legacyDuration(d *durationpb.Duration, ns int64) time.Duration {
	if d != nil {
		return d.AsDuration()
	}
	return time.Duration(ns)
}

// UpgradeLegacyDurations moves the legacy nanosecond durations of every
// group into their Duration fields. It reports whether anything changed.
func (j *Job) UpgradeLegacyDurations() bool {
	changed := false
	for _, tg := range j.GetTaskGroups() {
		if tg.UpgradeLegacyDurations() {
			changed = true
		}
	}
	return changed
}

// UpgradeLegacyDurations moves the group's legacy nanosecond durations, its
// reschedule policy's included, into their Duration fields. It reports
// whether anything changed.
func (tg *TaskGroup) UpgradeLegacyDurations() bool {
	if tg == nil {
		return false
	}
	var a, b bool
	tg.MaxClientDisconnect, a = upgradeDuration(tg.MaxClientDisconnect, tg.MaxClientDisconnectNs)
	tg.StopAfterClientDisconnect, b = upgradeDuration(tg.StopAfterClientDisconnect, tg.StopAfterClientDisconnectNs)
	tg.MaxClientDisconnectNs, tg.StopAfterClientDisconnectNs = 0, 0
	c := tg.GetReschedulePolicy().UpgradeLegacyDurations()
	return a || b || c
}

// UpgradeLegacyDurations moves the policy's legacy nanosecond durations
// into their Duration fields. It reports whether anything changed.
func (rp *ReschedulePolicy) UpgradeLegacyDurations() bool {
	if rp == nil {
		return false
	}
	var a, b, c bool
	rp.Interval, a = upgradeDuration(rp.Interval, rp.IntervalNs)
	rp.Delay, b = upgradeDuration(rp.Delay, rp.DelayNs)
	rp.MaxDelay, c = upgradeDuration(rp.MaxDelay, rp.MaxDelayNs)
	rp.IntervalNs, rp.DelayNs, rp.MaxDelayNs = 0, 0, 0
	return a || b || c
}

// UpgradeLegacyDurations moves every group's legacy progress deadline into
// its Duration field. It reports whether anything changed.
func (d *Deployment) UpgradeLegacyDurations() bool {
	changed := false
	for _, g := range d.GetGroups() {
		if g.UpgradeLegacyDurations() {
			changed = true
		}
	}
	return changed
}

// UpgradeLegacyDurations moves the group's legacy progress deadline into
// its Duration field. It reports whether anything changed.
func (g *DeploymentGroup) UpgradeLegacyDurations() bool {
	if g == nil {
		return false
	}
	var changed bool
	g.ProgressDeadline, changed = upgradeDuration(g.ProgressDeadline, g.ProgressDeadlineNs)
	g.ProgressDeadlineNs = 0
	return changed
}

// UpgradeLegacyDurations moves the legacy delays of the allocation's
// reschedule events into their Duration fields. It reports whether anything
// changed.
func (a *Allocation) UpgradeLegacyDurations() bool {
	changed := false
	for _, e := range a.GetRescheduleTracker().GetEvents() {
		if e.UpgradeLegacyDurations() {
			changed = true
		}
	}
	return changed
}

// UpgradeLegacyDurations moves the event's legacy delay into its Duration
// field. It reports whether anything changed.
func (e *RescheduleEvent) UpgradeLegacyDurations() bool {
	if e == nil {
		return false
	}
	var changed bool
	e.Delay, changed = upgradeDuration(e.Delay, e.DelayNs)
	e.DelayNs = 0
	return changed
}

// EffectiveMaxWait is how long the read may block: max_wait, or the legacy
// max_wait_ns of a client built before 0.3.
func (q *QueryOptions) EffectiveMaxWait() time.Duration {
	return legacyDuration(q.GetMaxWait(), q.GetMaxWaitNs())
}

// EffectiveMaxStale is the staleness the caller accepts: max_stale, or the
// legacy max_stale_ns of a client built before 0.3.
func (q *QueryOptions) EffectiveMaxStale() time.Duration {
	return legacyDuration(q.GetMaxStale(), q.GetMaxStaleNs())
}

// EffectiveMaxWait is how long the poll may block: max_wait, or the legacy
// max_wait_ns of an agent built before 0.3.
func (r *GetAllocsRequest) EffectiveMaxWait() time.Duration {
	return legacyDuration(r.GetMaxWait(), r.GetMaxWaitNs())
}

// EffectiveDeadline is the drain's deadline as a duration: deadline, or the
// legacy deadline_ns of a client built before 0.3.
func (r *UpdateNodeDrainRequest) EffectiveDeadline() time.Duration {
	return legacyDuration(r.GetDeadline(), r.GetDeadlineNs())
}

// SetHeartbeatTTL sets heartbeat_ttl, cut to whole milliseconds so that it
// reads "11.753s" rather than "11.753669316s" (cut, never rounded up: the
// agent must not be told later than the server's timer). For one release
// it also sets the legacy heartbeat_ttl_ns to the same value, so that
// agents built before 0.3, which read only that, keep their TTL instead of
// seeing zero.
func (r *RegisterNodeResponse) SetHeartbeatTTL(ttl time.Duration) {
	ttl = ttl.Truncate(time.Millisecond)
	r.HeartbeatTtl = durationpb.New(ttl)
	r.HeartbeatTtlNs = int64(ttl)
}

// SetHeartbeatTTL sets heartbeat_ttl and, for one release, the legacy
// heartbeat_ttl_ns (see RegisterNodeResponse.SetHeartbeatTTL).
func (r *UpdateNodeStatusResponse) SetHeartbeatTTL(ttl time.Duration) {
	ttl = ttl.Truncate(time.Millisecond)
	r.HeartbeatTtl = durationpb.New(ttl)
	r.HeartbeatTtlNs = int64(ttl)
}

// SetLastContact records the time since the server last heard from the
// leader; negative means never, which leaves last_contact unset. For one
// release it also sets the legacy last_contact_ns (-1 for never), which
// the autopilot of a leader built before 0.3 reads during a rolling
// upgrade.
func (r *ServerInfoResponse) SetLastContact(d time.Duration) {
	if d < 0 {
		r.LastContact, r.LastContactNs = nil, -1
		return
	}
	r.LastContact, r.LastContactNs = durationpb.New(d), int64(d)
}

// EffectiveLastContact is the time since the answering server last heard
// from the leader, negative if never: last_contact, or the legacy
// last_contact_ns of a server built before 0.3 (which always sets it, -1
// for never, so an unset last_contact with a zero legacy value is a leader
// or a server that just heard from it).
func (r *ServerInfoResponse) EffectiveLastContact() time.Duration {
	return legacyDuration(r.GetLastContact(), r.GetLastContactNs())
}
