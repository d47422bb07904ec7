package cli

import (
	"flag"
	"strings"

	"google.golang.org/grpc"

	"github.com/droverhq/drover/rpc"
)

// tlsFileFlags adds -tls-ca-file, -tls-cert-file, -tls-key-file and
// -token: to every client command through clientFlags, and to agent and
// bench, which dial many servers themselves. The TLS flags carry the
// names `drover server` gives its own TLS files; -ca-file, -cert-file and
// -key-file, their names before, stay for one release as deprecated
// aliases.
func tlsFileFlags(fs *flag.FlagSet, o *clientOptions) {
	o.flags = fs
	fs.StringVar(&o.caFile, "tls-ca-file", "", "PEM file of the cluster CA: connect over TLS and verify the server (default: $"+caFileEnv+")")
	fs.StringVar(&o.certFile, "tls-cert-file", "", "PEM file of the client certificate presented to the server (default: $"+certFileEnv+")")
	fs.StringVar(&o.keyFile, "tls-key-file", "", "PEM file of the private key of -tls-cert-file (default: $"+keyFileEnv+")")
	fs.StringVar(&o.token, "token", "", "secret of the ACL token to call with (default: $"+tokenEnv+")")
	aliasFlag(fs, "ca-file", "tls-ca-file")
	aliasFlag(fs, "cert-file", "tls-cert-file")
	aliasFlag(fs, "key-file", "tls-key-file")
}

// fleetDialOptions are the dial options of agent and bench, which connect
// to servers through simagent and loadgen: the TLS credentials of the TLS
// file flags (none for plaintext), the ACL token, and the likely cause
// attached to a call that fails to connect (connectionError). simagent
// and loadgen add them to their own options (rpc.ClientDialOptions,
// plaintext), so the codec and message-size limits stay those of every
// drover client.
func fleetDialOptions(o *clientOptions, servers []string) ([]grpc.DialOption, error) {
	var opts []grpc.DialOption
	if secret := o.secret(); secret != "" {
		opts = append(opts, grpc.WithPerRPCCredentials(rpc.TokenCredentials(secret)))
	}
	cfg := o.tls() // once: reading a deprecated variable warns
	opts = append(opts, explainConnectionErrors(strings.Join(servers, ","), cfg.Enabled())...)
	if !cfg.Enabled() {
		return opts, nil
	}
	creds, err := cfg.ClientCredentials()
	if err != nil {
		return nil, err
	}
	return append(opts, grpc.WithTransportCredentials(creds)), nil
}
