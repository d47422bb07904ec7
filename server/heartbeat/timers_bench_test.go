package heartbeat

import (
	"log/slog"
	"testing"
)

// BenchmarkReset measures the heartbeat hot path with 50,000 tracked nodes.
func BenchmarkReset(b *testing.B) {
	expire, _ := recordingExpire(false)
	timers := NewTimers(DefaultConfig(), expire, slog.New(slog.DiscardHandler))
	nodes := fleet(50000)
	if err := timers.Start(b.Context(), nodes); err != nil {
		b.Fatalf("Start: %v", err)
	}
	defer timers.Stop()
	b.ReportAllocs()
	i := 0
	for b.Loop() {
		if _, err := timers.Reset(nodes[i%len(nodes)]); err != nil {
			b.Fatalf("Reset: %v", err)
		}
		i++
	}
}
