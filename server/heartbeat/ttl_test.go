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

func TestValidate(t *testing.T) {
	tests := []struct {
		name    string
		change  func(*Config)
		wantErr bool
	}{
		{"defaults", func(*Config) {}, false},
		{"guard disabled with zero rate and window", func(c *Config) {
			c.MassFailureFraction, c.ThrottledMarkRate, c.MassFailureWindow = 0, 0, 0
		}, false},
		{"fraction of one", func(c *Config) { c.MassFailureFraction = 1 }, false},
		{"negative min TTL", func(c *Config) { c.MinTTL = -time.Second }, true},
		{"negative max per second", func(c *Config) { c.MaxPerSecond = -1 }, true},
		{"negative grace", func(c *Config) { c.Grace = -time.Second }, true},
		{"negative failover TTL", func(c *Config) { c.FailoverTTL = -time.Second }, true},
		{"negative fraction", func(c *Config) { c.MassFailureFraction = -0.1 }, true},
		{"fraction above one", func(c *Config) { c.MassFailureFraction = 1.5 }, true},
		{"negative window", func(c *Config) { c.MassFailureWindow = -time.Second }, true},
		{"negative min nodes", func(c *Config) { c.MassFailureMinNodes = -1 }, true},
		{"negative rate", func(c *Config) { c.ThrottledMarkRate = -1 }, true},
		{"zero rate with guard", func(c *Config) { c.ThrottledMarkRate = 0 }, true},
		{"zero window with guard", func(c *Config) { c.MassFailureWindow = 0 }, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cfg := DefaultConfig()
			tt.change(&cfg)
			if err := cfg.Validate(); (err != nil) != tt.wantErr {
				t.Fatalf("Validate() = %v, want error %v", err, tt.wantErr)
			}
		})
	}
}

// TestFailoverTTLCoversLongTTLs checks that the failover TTL never falls
// short of the longest TTL a node of the fleet may hold.
func TestFailoverTTLCoversLongTTLs(t *testing.T) {
	cfg := DefaultConfig()
	cases := []struct {
		nodes int
		want  time.Duration
	}{
		{0, 5 * time.Minute},
		{1000, 5 * time.Minute},    // TTLs up to 40s
		{10000, 410 * time.Second}, // base 200s: TTLs up to 400s, plus the 10s grace
		{50000, 2*1000*time.Second + 10*time.Second},
	}
	for _, tc := range cases {
		if got := cfg.failoverTTL(tc.nodes); got != tc.want {
			t.Errorf("failoverTTL(%d) = %s, want %s", tc.nodes, got, tc.want)
		}
	}
}
