package cli

import (
	"errors"
	"strings"
	"testing"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/droverhq/drover/internal/testcerts"
)

// The likely causes, by the words each begins with.
const (
	causeRefused      = "Nothing is listening at"
	causeUnresolved   = "The host of"
	causePlainTLS     = "closed the connection before speaking gRPC: it most likely requires TLS"
	causeTLSPlain     = "does not use TLS, but this command does"
	causeWrongCA      = "is not signed by the CA in -tls-ca-file"
	causeNotServer    = "is not a drover server's"
	causeCertRefused  = "most likely refused this command's client certificate"
	unavailablePrefix = "connection error: desc = "
)

func TestConnectionCause(t *testing.T) {
	const addr = "10.0.0.1:4650"
	tests := []struct {
		name    string
		err     error
		withTLS bool
		want    string // substring of the cause; "" for none
	}{
		{"refused", status.Error(codes.Unavailable, unavailablePrefix+`"transport: Error while dialing: dial tcp 10.0.0.1:4650: connect: connection refused"`), false, causeRefused + " 10.0.0.1:4650: is the server running, and is -address (or $DROVER_ADDR) right?"},
		{"refused with TLS", status.Error(codes.Unavailable, unavailablePrefix+`"transport: Error while dialing: dial tcp 10.0.0.1:4650: connect: connection refused"`), true, causeRefused},
		{"unresolvable host", status.Error(codes.Unavailable, "name resolver error: produced zero addresses"), false, causeUnresolved},
		{"plaintext client, TLS server", status.Error(codes.Unavailable, unavailablePrefix+`"error reading server preface: EOF"`), false, causePlainTLS},
		{"plaintext client, TLS server resetting", status.Error(codes.Unavailable, unavailablePrefix+`"error reading server preface: read tcp: connection reset by peer"`), false, causePlainTLS},
		{"TLS client, plaintext server", status.Error(codes.Unavailable, unavailablePrefix+`"transport: authentication handshake failed: tls: first record does not look like a TLS handshake"`), true, causeTLSPlain},
		{"wrong CA", status.Error(codes.Unavailable, unavailablePrefix+`"transport: authentication handshake failed: tls: failed to verify certificate: x509: certificate signed by unknown authority"`), true, causeWrongCA},
		{"not a server certificate", status.Error(codes.Unavailable, unavailablePrefix+`"transport: authentication handshake failed: tls: failed to verify certificate: x509: certificate is valid for client.drover, not server.drover"`), true, causeNotServer},
		{"client certificate refused: broken pipe", status.Error(codes.Unavailable, "write tcp 127.0.0.1:60588->127.0.0.1:41839: write: broken pipe"), true, causeCertRefused},
		{"client certificate refused: alert", status.Error(codes.Unavailable, unavailablePrefix+`"remote error: tls: certificate required"`), true, causeCertRefused},
		{"client certificate refused: EOF", status.Error(codes.Unavailable, "EOF"), true, causeCertRefused},
		{"no leader is not a connection failure", status.Error(codes.Unavailable, "no cluster leader"), false, ""},
		{"another code", status.Error(codes.NotFound, "connection refused"), false, ""},
		{"not a status", errors.New("connection refused"), false, ""},
		{"no error", nil, false, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := connectionCause(tt.err, addr, tt.withTLS)
			if tt.want == "" && got != "" || !strings.Contains(got, tt.want) {
				t.Errorf("cause %q, want it to contain %q", got, tt.want)
			}
		})
	}
}

// TestConnectionErrorsNameTheCause calls real listeners, with and without
// TLS, the wrong way round and checks that stderr names the cause.
func TestConnectionErrorsNameTheCause(t *testing.T) {
	t.Setenv(addrEnv, "")
	for _, name := range []string{caFileEnv, certFileEnv, keyFileEnv, oldCAFileEnv, oldCertFileEnv, oldKeyFileEnv} {
		t.Setenv(name, "")
	}
	certs := testcerts.New(t)
	otherCluster := testcerts.New(t)
	tlsAddr := startTLSFake(t, &fakeOperator{}, certs)
	plainAddr := startFake(t, &fakeOperator{})
	dead := deadAddr(t)
	tlsFlags := func(s *testcerts.Set, withCert bool) []string {
		flags := []string{"-tls-ca-file", s.CAFile}
		if withCert {
			flags = append(flags, "-tls-cert-file", s.ClientCertFile, "-tls-key-file", s.ClientKeyFile)
		}
		return flags
	}
	tests := []struct {
		name  string
		addr  string
		flags []string
		want  string
	}{
		{"plaintext client, TLS server", tlsAddr, nil, causePlainTLS},
		{"TLS client, plaintext server", plainAddr, tlsFlags(certs, true), causeTLSPlain},
		{"nothing listening", dead, nil, causeRefused + " " + dead},
		{"nothing listening, TLS", dead, tlsFlags(certs, true), causeRefused},
		{"another cluster's CA", tlsAddr, tlsFlags(otherCluster, true), causeWrongCA},
		{"no client certificate", tlsAddr, tlsFlags(certs, false), causeCertRefused},
		{"a client certificate of another cluster", tlsAddr, []string{"-tls-ca-file", certs.CAFile, "-tls-cert-file", otherCluster.ClientCertFile, "-tls-key-file", otherCluster.ClientKeyFile}, causeCertRefused},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, stderr, err := run(t, withAddr(tt.addr, serverMembers, tt.flags...)...)
			t.Logf("stderr:\n%s", stderr)
			if err == nil || !Reported(err) {
				t.Fatalf("error %v; want a reported error", err)
			}
			if !strings.HasPrefix(stderr, "Error listing server members: ") || !strings.Contains(stderr, tt.want) {
				t.Errorf("stderr does not report the failure and name its cause %q", tt.want)
			}
		})
	}
}
