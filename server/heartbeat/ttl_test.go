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
		{"zero min TTL", func(c *Config) { c.MinTTL = 0 }, true},
		{"zero failover TTL", func(c *Config) { c.FailoverTTL = 0 }, true},
		{"zero max per second", func(c *Config) { c.MaxPerSecond = 0 }, false},
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
// short of the longest TTL a node of the fleet may hold, whether the fleet's
// size or MinTTL makes the TTLs long.
func TestFailoverTTLCoversLongTTLs(t *testing.T) {
	withMinTTL := func(d time.Duration) Config {
		cfg := DefaultConfig()
		cfg.MinTTL = d
		return cfg
	}
	noRate := DefaultConfig()
	noRate.MaxPerSecond, noRate.MinTTL = 0, 3*time.Minute
	cases := []struct {
		name  string
		cfg   Config
		nodes int
		want  time.Duration
	}{
		{"defaults, no nodes", DefaultConfig(), 0, 5 * time.Minute},
		{"defaults, TTLs up to 40s", DefaultConfig(), 1000, 5 * time.Minute},
		{"defaults, base 200s", DefaultConfig(), 10000, 410 * time.Second}, // TTLs up to 400s, plus the 10s grace
		{"defaults, base 1000s", DefaultConfig(), 50000, 2*1000*time.Second + 10*time.Second},
		{"min TTL 2.5m: TTLs up to exactly 5m", withMinTTL(150 * time.Second), 10, 5 * time.Minute},
		{"min TTL 3m: TTLs up to 6m", withMinTTL(3 * time.Minute), 10, 6*time.Minute + 10*time.Second},
		{"min TTL 3m above the fleet's base", withMinTTL(3 * time.Minute), 5000, 6*time.Minute + 10*time.Second},
		{"fleet's base above min TTL 3m", withMinTTL(3 * time.Minute), 10000, 410 * time.Second},
		{"min TTL 3m without a rate", noRate, 50000, 6*time.Minute + 10*time.Second},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got := tc.cfg.failoverTTL(tc.nodes)
			if got != tc.want {
				t.Fatalf("failoverTTL(%d) = %s, want %s", tc.nodes, got, tc.want)
			}
			for range 100 {
				if ttl := tc.cfg.TTL(tc.nodes); ttl > got {
					t.Fatalf("TTL(%d) handed out %s, beyond the failover TTL %s", tc.nodes, ttl, got)
				}
			}
		})
	}
}
