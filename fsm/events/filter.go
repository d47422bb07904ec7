package events

import (
	"slices"

	droverv1 "github.com/droverhq/drover/proto/drover/v1"
)

// filter selects the events a subscription receives.
type filter struct {
	topics []droverv1.Topic    // nil = all topics; few, so a scan beats a map
	keys   map[string]struct{} // nil = all keys
}

func newFilter(topics []droverv1.Topic, keys []string) filter {
	var f filter
	if len(topics) > 0 {
		f.topics = slices.Clone(topics)
	}
	if len(keys) > 0 {
		f.keys = make(map[string]struct{}, len(keys))
		for _, k := range keys {
			f.keys[k] = struct{}{}
		}
	}
	return f
}

func (f *filter) match(e *droverv1.Event) bool {
	if f.topics != nil && !slices.Contains(f.topics, e.GetTopic()) {
		return false
	}
	if f.keys != nil {
		if _, ok := f.keys[e.GetKey()]; !ok {
			return false
		}
	}
	return true
}

// apply returns the matching events. When all match it returns the shared
// slice without copying, clipped so that an append by the caller cannot
// write into the broker's backing array.
func (f *filter) apply(events []*droverv1.Event) []*droverv1.Event {
	if f.topics == nil && f.keys == nil {
		return slices.Clip(events)
	}
	for i, e := range events {
		if f.match(e) {
			continue
		}
		// First mismatch: copy the matching prefix and filter the rest.
		out := make([]*droverv1.Event, i, len(events)-1)
		copy(out, events[:i])
		for _, e := range events[i+1:] {
			if f.match(e) {
				out = append(out, e)
			}
		}
		return out
	}
	return slices.Clip(events)
}
