package cli

import (
	"bytes"
	"context"
	"strings"
	"testing"
	"time"

	droverv1 "github.com/droverhq/drover/proto/drover/v1"
)

func TestServerMembersExitCode(t *testing.T) {
	t.Setenv(addrEnv, "")
	healthy := &droverv1.ServerHealth{Id: "s1", Voter: true, Leader: true, Healthy: true}
	tests := []struct {
		name       string
		members    *droverv1.ServerMembersResponse
		json       bool
		wantCode   int
		wantStderr string
	}{
		{name: "healthy", members: &droverv1.ServerMembersResponse{Healthy: true, Servers: []*droverv1.ServerHealth{healthy}}},
		{
			name:     "a row unhealthy, the verdict healthy (joined since the last check)",
			members:  fakeMembers,
			wantCode: 0,
		},
		{
			name: "unhealthy",
			members: &droverv1.ServerMembersResponse{Servers: []*droverv1.ServerHealth{healthy,
				{Id: "s2", Voter: true, Error: "last contact with the leader 3s ago exceeds 200ms"},
				{Id: "s3", Voter: true}}},
			wantCode:   exitUnhealthy,
			wantStderr: "Error: the cluster is unhealthy: s2 (last contact with the leader 3s ago exceeds 200ms), s3 (unhealthy)\n",
		},
		{
			name:       "unhealthy, as JSON",
			members:    &droverv1.ServerMembersResponse{Servers: []*droverv1.ServerHealth{{Id: "s2", Error: "not answering"}}},
			json:       true,
			wantCode:   exitUnhealthy,
			wantStderr: "Error: the cluster is unhealthy: s2 (not answering)\n",
		},
		{
			name:       "no verdict (no leader)",
			members:    &droverv1.ServerMembersResponse{},
			wantCode:   exitUnhealthy,
			wantStderr: "Error: the cluster is unhealthy\n",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			addr := startFake(t, &fakeOperator{members: tt.members})
			args := withAddr(addr, serverMembers)
			if tt.json {
				args = append(args, "-json")
			}
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			var stdout, stderr bytes.Buffer
			code := Main(ctx, args, &stdout, &stderr)
			if code != tt.wantCode || stderr.String() != tt.wantStderr {
				t.Errorf("exit code %d, stderr %q; want %d, %q", code, stderr.String(), tt.wantCode, tt.wantStderr)
			}
			if want := "Cluster healthy: "; !tt.json && !strings.Contains(stdout.String(), want) || tt.json && !strings.HasPrefix(stdout.String(), "{") {
				t.Errorf("the report is not printed whole:\n%s", stdout.String())
			}
		})
	}
}
