package cli

import (
	"net"
	"strings"
	"testing"

	"google.golang.org/grpc"

	"github.com/droverhq/drover/internal/testcerts"
	droverv1 "github.com/droverhq/drover/proto/drover/v1"
	"github.com/droverhq/drover/rpc"
)

// startTLSFake serves f with mutual TLS and certs' server certificate until
// the test ends and returns the address.
func startTLSFake(t *testing.T, f *fakeOperator, certs *testcerts.Set) string {
	t.Helper()
	creds, err := certs.Server().ServerCredentials()
	if err != nil {
		t.Fatal(err)
	}
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := grpc.NewServer(grpc.Creds(creds), grpc.ForceServerCodecV2(rpc.Codec{}))
	droverv1.RegisterOperatorServiceServer(srv, f)
	done := make(chan struct{})
	go func() {
		defer close(done)
		_ = srv.Serve(lis)
	}()
	t.Cleanup(func() {
		srv.Stop()
		<-done
	})
	return lis.Addr().String()
}

func TestClientTLS(t *testing.T) {
	certs := testcerts.New(t)
	files := []string{"-tls-ca-file", certs.CAFile, "-tls-cert-file", certs.ClientCertFile, "-tls-key-file", certs.ClientKeyFile}
	tests := []struct {
		name     string
		flags    []string
		env      map[string]string
		wantErr  string // substring of stderr; "" for success
		wantWarn string // substring of stderr on success
	}{
		{name: "flags", flags: files},
		{name: "environment", env: map[string]string{caFileEnv: certs.CAFile, certFileEnv: certs.ClientCertFile, keyFileEnv: certs.ClientKeyFile}},
		{name: "flags win over the environment", flags: files, env: map[string]string{caFileEnv: "/nonexistent/ca.pem"}},
		{
			name:     "deprecated flag names",
			flags:    []string{"-ca-file", certs.CAFile, "-cert-file", certs.ClientCertFile, "-key-file", certs.ClientKeyFile},
			wantWarn: "warning: -ca-file is deprecated and goes in the next release; use -tls-ca-file\n",
		},
		{
			name:     "deprecated environment names",
			env:      map[string]string{oldCAFileEnv: certs.CAFile, oldCertFileEnv: certs.ClientCertFile, oldKeyFileEnv: certs.ClientKeyFile},
			wantWarn: "warning: $DROVER_CACERT is deprecated and goes in the next release; use $DROVER_TLS_CA_FILE\n",
		},
		{name: "current environment names win over deprecated ones", env: map[string]string{caFileEnv: certs.CAFile, certFileEnv: certs.ClientCertFile, keyFileEnv: certs.ClientKeyFile, oldCAFileEnv: "/nonexistent/ca.pem"}},
		{name: "plaintext against TLS", wantErr: "(Unavailable)"},
		{name: "CA without a client certificate", flags: []string{"-tls-ca-file", certs.CAFile}, wantErr: "(Unavailable)"},
		{name: "certificate without key", flags: []string{"-tls-ca-file", certs.CAFile, "-tls-cert-file", certs.ClientCertFile}, wantErr: "must be given together"},
		{name: "missing CA file", flags: []string{"-tls-ca-file", "/nonexistent/ca.pem"}, wantErr: "Error connecting to 127.0.0.1:"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Setenv(addrEnv, "")
			for _, name := range []string{caFileEnv, certFileEnv, keyFileEnv, oldCAFileEnv, oldCertFileEnv, oldKeyFileEnv} {
				t.Setenv(name, tt.env[name])
			}
			fake := &fakeOperator{}
			addr := startTLSFake(t, fake, certs)
			stdout, stderr, err := run(t, withAddr(addr, serverMembers, tt.flags...)...)
			if tt.wantErr == "" {
				if err != nil || !strings.HasSuffix(stdout, "Cluster healthy: true, failure tolerance: 1\n") {
					t.Fatalf("error %v; stdout %q; stderr:\n%s", err, stdout, stderr)
				}
				if tt.wantWarn == "" && stderr != "" || !strings.Contains(stderr, tt.wantWarn) {
					t.Errorf("stderr %q, want %q", stderr, tt.wantWarn)
				}
				return
			}
			t.Logf("stderr: %s", stderr)
			if err == nil || !Reported(err) || !strings.Contains(stderr, tt.wantErr) {
				t.Fatalf("error %v; stderr %q; want a reported error mentioning %q", err, stderr, tt.wantErr)
			}
			if n := len(fake.requests()); n != 0 {
				t.Errorf("the server answered %d calls", n)
			}
		})
	}
}
