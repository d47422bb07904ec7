package cli

import "testing"

func TestClosest(t *testing.T) {
	commands := []string{"server", "job", "eval", "deployment", "acl", "node", "operator", "system", "bench", "agent", "dev", "version"}
	tests := []struct {
		typed string
		want  string // "" for no suggestion
	}{
		{"jbo", "job"},
		{"jobs", "job"},
		{"sever", "server"},
		{"depl", "deployment"},
		{"deploymnet", "deployment"},
		{"Node", "node"},
		{"opertor", "operator"},
		{"frobnicate", ""},
		{"x", ""},
		{"de", "dev"}, // deployment and dev both begin so; dev is one letter away
	}
	for _, tt := range tests {
		got, ok := closest(tt.typed, commands)
		if tt.want == "" {
			if ok {
				t.Errorf("closest(%q) = %q, want no suggestion", tt.typed, got)
			}
			continue
		}
		if !ok || got != tt.want {
			t.Errorf("closest(%q) = %q, %t; want %q", tt.typed, got, ok, tt.want)
		}
	}
}
