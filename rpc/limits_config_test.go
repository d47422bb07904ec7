package rpc

import (
	"strings"
	"testing"
	"time"
)

func TestLimitsValidate(t *testing.T) {
	tests := []struct {
		name    string
		edit    func(*Limits)
		wantErr string
	}{
		{"defaults", func(*Limits) {}, ""},
		{"one of each", func(l *Limits) {
			l.MaxConnsPerIP, l.MaxStreamsPerConn, l.MaxAgentCalls, l.MaxOperatorCalls = 1, 1, 1, 1
		}, ""},
		{"no connections", func(l *Limits) { l.MaxConnsPerIP = 0 }, "max connections per IP 0: must be at least 1"},
		{"negative streams", func(l *Limits) { l.MaxStreamsPerConn = -1 }, "max streams per connection -1: must be at least 1"},
		{"streams beyond HTTP/2", func(l *Limits) { l.MaxStreamsPerConn = 1 << 33 }, "must be at most 4294967295"},
		{"no agent calls", func(l *Limits) { l.MaxAgentCalls = 0 }, "max agent calls 0"},
		{"no operator calls", func(l *Limits) { l.MaxOperatorCalls = 0 }, "max operator calls 0"},
		{"keepalive 0", func(l *Limits) { l.KeepaliveMinTime = 0 }, "keepalive min time 0s: must be above 0"},
		{"keepalive at the clients' interval", func(l *Limits) { l.KeepaliveMinTime = ClientKeepaliveTime }, ""},
		{"keepalive above the clients' interval", func(l *Limits) { l.KeepaliveMinTime = time.Minute }, "keepalive min time 1m0s: must be at most 30s"},
		{"pings without streams refused", func(l *Limits) { l.KeepalivePermitWithoutStream = false }, ""},
	}
	for _, tt := range tests {
		l := DefaultLimits()
		tt.edit(&l)
		err := l.Validate()
		switch {
		case tt.wantErr == "" && err != nil:
			t.Errorf("%s: Validate() = %v, want nil", tt.name, err)
		case tt.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tt.wantErr)):
			t.Errorf("%s: Validate() = %v, want an error containing %q", tt.name, err, tt.wantErr)
		}
	}
	if d := DefaultLimits(); d.MaxOperatorCalls < 1 || d.MaxAgentCalls <= d.MaxOperatorCalls {
		t.Errorf("default bounds: %d operator calls, %d agent calls; want operators bounded tighter than agents", d.MaxOperatorCalls, d.MaxAgentCalls)
	}
}
