package cli

import (
	"bytes"
	"flag"
	"testing"
)

func TestAliasFlag(t *testing.T) {
	tests := []struct {
		name      string
		args      []string
		wantValue string
		wantBool  bool
		wantWarn  string
	}{
		{name: "current name", args: []string{"-address", "a:1"}, wantValue: "a:1"},
		{name: "old name", args: []string{"-servers", "a:1,b:2"}, wantValue: "a:1,b:2", wantWarn: "warning: -servers is deprecated and goes in the next release; use -address\n"},
		{name: "old boolean name without a value", args: []string{"-old-bool"}, wantBool: true, wantWarn: "warning: -old-bool is deprecated and goes in the next release; use -new-bool\n"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var warn bytes.Buffer
			fs := flag.NewFlagSet("test", flag.ContinueOnError)
			fs.SetOutput(&warn)
			addr := fs.String("address", "", "")
			on := fs.Bool("new-bool", false, "")
			aliasFlag(fs, "servers", "address")
			aliasFlag(fs, "old-bool", "new-bool")
			if err := fs.Parse(tt.args); err != nil {
				t.Fatal(err)
			}
			if *addr != tt.wantValue || *on != tt.wantBool || warn.String() != tt.wantWarn {
				t.Errorf("address %q, new-bool %t, warned %q; want %q, %t, %q", *addr, *on, warn.String(), tt.wantValue, tt.wantBool, tt.wantWarn)
			}
		})
	}
}

func TestAgentDeprecatedServers(t *testing.T) {
	cfg, err := parseAgent(t, "-sim-nodes", "1", "-servers", "a:1,b:2")
	if err != nil {
		t.Fatal(err)
	}
	if len(cfg.Servers) != 2 || cfg.Servers[0] != "a:1" {
		t.Errorf("servers %v, want [a:1 b:2]", cfg.Servers)
	}
}
