package tlsconfig_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/droverhq/drover/internal/testcerts"
	"github.com/droverhq/drover/internal/tlsconfig"
)

func TestValidate(t *testing.T) {
	tests := []struct {
		name        string
		cfg         tlsconfig.Config
		server      string // substring of Validate's error; "" for none
		client      string // substring of ValidateClient's error
		wantEnabled bool
	}{
		{name: "off", cfg: tlsconfig.Config{}},
		{name: "all three", cfg: tlsconfig.Config{CAFile: "ca", CertFile: "c", KeyFile: "k"}, wantEnabled: true},
		{name: "CA only", cfg: tlsconfig.Config{CAFile: "ca"}, server: "missing: certificate file, key file", wantEnabled: true},
		{name: "no key", cfg: tlsconfig.Config{CAFile: "ca", CertFile: "c"}, server: "missing: key file", client: "missing: key file", wantEnabled: true},
		{name: "no CA", cfg: tlsconfig.Config{CertFile: "c", KeyFile: "k"}, server: "missing: CA file", client: "a CA file is required", wantEnabled: true},
		{name: "key only", cfg: tlsconfig.Config{KeyFile: "k"}, server: "missing: CA file, certificate file", client: "a CA file is required", wantEnabled: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := tt.cfg.Enabled(); got != tt.wantEnabled {
				t.Errorf("Enabled = %v, want %v", got, tt.wantEnabled)
			}
			check := func(what string, err error, want string) {
				switch {
				case want == "" && err != nil:
					t.Errorf("%s: %v, want no error", what, err)
				case want != "" && (err == nil || !strings.Contains(err.Error(), want)):
					t.Errorf("%s: %v, want an error mentioning %q", what, err, want)
				}
			}
			check("Validate", tt.cfg.Validate(), tt.server)
			check("ValidateClient", tt.cfg.ValidateClient(), tt.client)
		})
	}
}

func TestLoadErrorsNameTheFile(t *testing.T) {
	set := testcerts.New(t)
	dir := t.TempDir()
	garbage := filepath.Join(dir, "garbage.pem")
	if err := os.WriteFile(garbage, []byte("not PEM"), 0o600); err != nil {
		t.Fatal(err)
	}
	missing := filepath.Join(dir, "missing.pem")
	tests := []struct {
		name string
		cfg  tlsconfig.Config
		want string
	}{
		{"missing CA", tlsconfig.Config{CAFile: missing, CertFile: set.ServerCertFile, KeyFile: set.ServerKeyFile}, missing},
		{"CA without PEM", tlsconfig.Config{CAFile: garbage, CertFile: set.ServerCertFile, KeyFile: set.ServerKeyFile}, garbage},
		{"missing certificate", tlsconfig.Config{CAFile: set.CAFile, CertFile: missing, KeyFile: set.ServerKeyFile}, missing},
		{"missing key", tlsconfig.Config{CAFile: set.CAFile, CertFile: set.ServerCertFile, KeyFile: missing}, missing},
		{"key of another certificate", tlsconfig.Config{CAFile: set.CAFile, CertFile: set.ServerCertFile, KeyFile: set.ClientKeyFile}, set.ServerCertFile},
		{"incomplete", tlsconfig.Config{CAFile: set.CAFile}, "missing"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if _, err := tt.cfg.ServerTLS(); err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("ServerTLS: %v, want an error naming %s", err, tt.want)
			}
			if _, err := tt.cfg.ClientCredentials(); tt.name != "incomplete" && (err == nil || !strings.Contains(err.Error(), tt.want)) {
				t.Errorf("ClientCredentials: %v, want an error naming %s", err, tt.want)
			}
		})
	}
	if _, err := (tlsconfig.Config{}).ServerCredentials(); err == nil {
		t.Error("ServerCredentials without TLS configured: no error")
	}
}

func TestBuiltConfigs(t *testing.T) {
	set := testcerts.New(t)
	srv, err := set.Server().ServerTLS()
	if err != nil {
		t.Fatal(err)
	}
	if srv.MinVersion != tlsconfig.MinVersion || len(srv.Certificates) != 1 || srv.ClientCAs == nil || srv.VerifyConnection != nil {
		t.Errorf("server config: min version %x, %d certificates, client CAs %v, VerifyConnection set %v",
			srv.MinVersion, len(srv.Certificates), srv.ClientCAs != nil, srv.VerifyConnection != nil)
	}
	if only := tlsconfig.OnlyServers(srv); only.VerifyConnection == nil || srv.VerifyConnection != nil {
		t.Error("OnlyServers must set VerifyConnection on a copy")
	}
	cli, err := tlsconfig.Config{CAFile: set.CAFile}.ClientTLS()
	if err != nil {
		t.Fatalf("client with a CA only: %v", err)
	}
	if cli.ServerName != tlsconfig.ServerName || cli.RootCAs == nil || len(cli.Certificates) != 0 {
		t.Errorf("client config: server name %q, root CAs %v, %d certificates", cli.ServerName, cli.RootCAs != nil, len(cli.Certificates))
	}
}
