package heartbeat

import (
	"slices"
	"testing"
)

func TestPendingQueue(t *testing.T) {
	tests := []struct {
		name   string
		push   []string
		remove []string
		want   []string
	}{
		{"empty", nil, nil, nil},
		{"fifo", []string{"a", "b", "c"}, nil, []string{"a", "b", "c"}},
		{"remove head", []string{"a", "b", "c"}, []string{"a"}, []string{"b", "c"}},
		{"remove middle", []string{"a", "b", "c"}, []string{"b"}, []string{"a", "c"}},
		{"remove tail", []string{"a", "b", "c"}, []string{"c"}, []string{"a", "b"}},
		{"remove all", []string{"a", "b"}, []string{"b", "a"}, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var q pendingQueue
			entries := map[string]*entry{}
			for _, id := range tt.push {
				entries[id] = &entry{id: id}
				q.push(entries[id])
			}
			for _, id := range tt.remove {
				q.remove(entries[id])
			}
			if q.len() != len(tt.want) {
				t.Fatalf("len = %d, want %d", q.len(), len(tt.want))
			}
			var got []string
			for e := q.pop(); e != nil; e = q.pop() {
				got = append(got, e.id)
			}
			if !slices.Equal(got, tt.want) {
				t.Fatalf("popped %v, want %v", got, tt.want)
			}
			if q.len() != 0 || q.head != nil || q.tail != nil {
				t.Fatalf("queue not empty after popping everything: %+v", q)
			}
		})
	}
}
