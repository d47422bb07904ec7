package heartbeat

import (
	"testing"
	"time"
)

func TestTTL(t *testing.T) {
	cfg := DefaultConfig()
	tests := []struct {
		nodes    int
		min, max time.Duration
	}{
		{0, 10 * time.Second, 20 * time.Second},
		{100, 10 * time.Second, 20 * time.Second},
		{500, 10 * time.Second, 20 * time.Second},
		{5000, 100 * time.Second, 200 * time.Second},
		{50000, 1000 * time.Second, 2000 * time.Second},
	}
	for _, tt := range tests {
		for range 100 {
			got := cfg.TTL(tt.nodes)
			if got < tt.min || got >= tt.max {
				t.Fatalf("TTL(%d) = %s, want in [%s, %s)", tt.nodes, got, tt.min, tt.max)
			}
		}
	}
}
