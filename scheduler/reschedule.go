package scheduler

import (
	"math"
	"slices"
	"time"

	"github.com/google/uuid"
	"google.golang.org/protobuf/types/known/durationpb"

	droverv1 "github.com/droverhq/drover/proto/drover/v1"
)

const (
	// rescheduleWindow: a failed allocation due within this much of now is
	// rescheduled now rather than through a follow-up evaluation.
	rescheduleWindow = int64(time.Second)
	// followupBatchWindow: delayed work due within this much of the first
	// item of a batch shares one follow-up evaluation, so that many
	// failures at once do not become as many evaluations.
	followupBatchWindow = int64(5 * time.Second)
	// maxRescheduleEvents bounds a reschedule tracker: a crash-looping
	// service under an unlimited policy would otherwise carry an ever
	// longer history from allocation to allocation.
	maxRescheduleEvents = 64
)

// rescheduleTiming is when a failed allocation is replaced.
type rescheduleTiming int

const (
	// rescheduleNever: the policy allows no further attempt.
	rescheduleNever rescheduleTiming = iota
	rescheduleNow
	rescheduleLater
)

// rescheduleDecision is what the policy says about one failed allocation.
type rescheduleDecision struct {
	timing rescheduleTiming
	// at is when the allocation is due (for rescheduleLater).
	at int64
	// delay is the policy's delay for this attempt, recorded in the
	// replacement's tracker.
	delay int64
}

// decideReschedule applies a group's reschedule policy to a failed
// allocation. The failure time is the allocation's last change: the
// agent's failure report, until the scheduler stamps a follow-up
// evaluation on it, after which that evaluation decides. An allocation
// whose follow-up is the evaluation being processed, or whose follow-up
// has already run (followupPending says it is no longer pending), is due
// now; so is one an operator asked to force-reschedule.
func decideReschedule(a *droverv1.Allocation, policy *droverv1.ReschedulePolicy, now int64, evalID string,
	followupPending func(evalID string) bool) rescheduleDecision {
	if !rescheduleAllowed(a, policy, now) && !a.GetDesiredTransition().GetForceReschedule() {
		return rescheduleDecision{timing: rescheduleNever}
	}
	delay := rescheduleDelay(policy, a.GetRescheduleTracker())
	d := rescheduleDecision{timing: rescheduleNow, delay: delay}
	if a.GetDesiredTransition().GetForceReschedule() {
		return d
	}
	if f := a.GetFollowupEvalId(); f != "" && (f == evalID || (followupPending != nil && !followupPending(f))) {
		return d
	}
	failed := a.GetModifyTime()
	if failed == 0 {
		failed = now
	}
	d.at = satAdd(failed, delay)
	if d.at <= now+rescheduleWindow {
		return d
	}
	d.timing = rescheduleLater
	return d
}

// rescheduleAllowed reports whether the policy has an attempt left: an
// unlimited policy always has; otherwise fewer than attempts reschedules
// happened within the interval before now.
func rescheduleAllowed(a *droverv1.Allocation, policy *droverv1.ReschedulePolicy, now int64) bool {
	if policy.GetUnlimited() {
		return true
	}
	if policy.GetAttempts() <= 0 {
		return false
	}
	since := now - int64(policy.GetInterval().AsDuration())
	used := 0
	for _, ev := range a.GetRescheduleTracker().GetEvents() {
		if ev.GetTime() > since {
			used++
		}
	}
	return used < int(policy.GetAttempts())
}

// rescheduleDelay is the wait before the next reschedule: the policy's
// delay, doubled for every reschedule so far under the exponential
// function, and never above max_delay when one is set.
func rescheduleDelay(policy *droverv1.ReschedulePolicy, tracker *droverv1.RescheduleTracker) int64 {
	d, maxDelay := int64(policy.GetDelay().AsDuration()), int64(policy.GetMaxDelay().AsDuration())
	if policy.GetDelayFunction() == droverv1.DelayFunction_DELAY_FUNCTION_EXPONENTIAL {
		for range tracker.GetEvents() {
			if d <= 0 || d > math.MaxInt64/2 || (maxDelay > 0 && d >= maxDelay) {
				break
			}
			d *= 2
		}
	}
	if maxDelay > 0 && d > maxDelay {
		d = maxDelay
	}
	return d
}

// rescheduleTracker builds the tracker of the allocation that replaces the
// failed allocation prev: prev's history plus this reschedule, at most
// maxRescheduleEvents of the newest.
func rescheduleTracker(prev *droverv1.Allocation, now int64, delay int64) *droverv1.RescheduleTracker {
	old := prev.GetRescheduleTracker().GetEvents()
	if len(old) >= maxRescheduleEvents {
		old = old[len(old)-maxRescheduleEvents+1:]
	}
	events := make([]*droverv1.RescheduleEvent, 0, len(old)+1)
	for _, ev := range old {
		events = append(events, ev.CloneVT())
	}
	events = append(events, &droverv1.RescheduleEvent{
		Time:        now,
		PrevAllocId: prev.GetId(),
		PrevNodeId:  prev.GetNodeId(),
		Delay:       delayDuration(delay),
	})
	return &droverv1.RescheduleTracker{Events: events}
}

// delayDuration is a reschedule event's delay: unset when there was none,
// which keeps the event small.
func delayDuration(delay int64) *durationpb.Duration {
	if delay == 0 {
		return nil
	}
	return durationpb.New(time.Duration(delay))
}

func satAdd(a, b int64) int64 {
	if b > 0 && a > math.MaxInt64-b {
		return math.MaxInt64
	}
	return a + b
}

// followupItem is one piece of delayed work: an allocation to look at
// again at a given time. stamp, when set, is the allocation's copy in the
// plan, which records the follow-up evaluation's id.
type followupItem struct {
	trigger droverv1.EvalTrigger
	at      int64
	stamp   *droverv1.Allocation
}

// followups collects delayed work across a job's task groups and turns it
// into as few evaluations as the batch window allows.
type followups struct {
	items []followupItem
}

func (f *followups) add(trigger droverv1.EvalTrigger, at int64, stamp *droverv1.Allocation) {
	f.items = append(f.items, followupItem{trigger: trigger, at: at, stamp: stamp})
}

// evals makes the follow-up evaluations of job, each due at the start of
// its batch, and stamps their ids on the allocation copies. Items are
// batched per trigger, in time order: an item more than the batch window
// after the current batch's start starts a new batch.
func (f *followups) evals(job *droverv1.Job, evalID string, now int64) []*droverv1.Evaluation {
	items := slices.Clone(f.items)
	slices.SortStableFunc(items, func(a, b followupItem) int {
		if a.trigger != b.trigger {
			return int(a.trigger) - int(b.trigger)
		}
		switch {
		case a.at < b.at:
			return -1
		case a.at > b.at:
			return 1
		}
		return 0
	})
	var out []*droverv1.Evaluation
	var cur *droverv1.Evaluation
	for _, it := range items {
		if cur == nil || cur.GetTriggeredBy() != it.trigger || it.at-cur.GetWaitUntil() >= followupBatchWindow {
			cur = followupEval(job, evalID, it.trigger, it.at, now)
			out = append(out, cur)
		}
		if it.stamp != nil {
			it.stamp.FollowupEvalId = cur.GetId()
		}
	}
	return out
}

// followupEval builds a delayed evaluation of job, following up evalID.
func followupEval(job *droverv1.Job, evalID string, trigger droverv1.EvalTrigger, waitUntil, now int64) *droverv1.Evaluation {
	desc := "created to reschedule failed allocations after their delay"
	switch trigger {
	case droverv1.EvalTrigger_EVAL_TRIGGER_MAX_DISCONNECT_TIMEOUT:
		desc = "created to mark allocations lost when their disconnect window ends"
	case droverv1.EvalTrigger_EVAL_TRIGGER_DEPLOYMENT:
		desc = "created to go on with a rollout once its stagger has passed"
	case droverv1.EvalTrigger_EVAL_TRIGGER_ALLOC_STOP:
		desc = "created to replace lost allocations once their agents have stopped them (stop_after_client_disconnect)"
	}
	return &droverv1.Evaluation{
		Id:                uuid.NewString(),
		Priority:          job.GetPriority(),
		Type:              job.GetType(),
		TriggeredBy:       trigger,
		JobId:             job.GetId(),
		JobModifyIndex:    job.GetJobModifyIndex(),
		Status:            droverv1.EvalStatus_EVAL_STATUS_PENDING,
		StatusDescription: desc,
		WaitUntil:         waitUntil,
		PreviousEval:      evalID,
		CreateTime:        now,
		ModifyTime:        now,
	}
}
