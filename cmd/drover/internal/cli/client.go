package cli

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"strings"
	"text/tabwriter"
	"time"

	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"

	"github.com/droverhq/drover/internal/tlsconfig"
	droverv1 "github.com/droverhq/drover/proto/drover/v1"
	"github.com/droverhq/drover/rpc"
)

// Settings shared by every command that talks to a server.
const (
	// addrEnv names the environment variable read when -address is not given.
	addrEnv = "DROVER_ADDR"
	// defaultAddr is the server address used when neither -address nor
	// DROVER_ADDR is set: the default -rpc-addr of `drover server`.
	defaultAddr = "127.0.0.1:4650"
	// defaultTimeout bounds one command's calls unless -timeout says otherwise.
	defaultTimeout = 30 * time.Second
	// caFileEnv, certFileEnv and keyFileEnv name the environment variables
	// read when -tls-ca-file, -tls-cert-file and -tls-key-file are not
	// given: the names `drover server` reads for its own flags of the same
	// names (DROVER_<FLAG>), so one environment serves both.
	caFileEnv   = "DROVER_TLS_CA_FILE"
	certFileEnv = "DROVER_TLS_CERT_FILE"
	keyFileEnv  = "DROVER_TLS_KEY_FILE"
	// oldCAFileEnv, oldCertFileEnv and oldKeyFileEnv are the variables'
	// names before they followed the server's (Nomad's names), still read
	// with a warning for one release.
	oldCAFileEnv   = "DROVER_CACERT"
	oldCertFileEnv = "DROVER_CLIENT_CERT"
	oldKeyFileEnv  = "DROVER_CLIENT_KEY"
	// tokenEnv names the environment variable read when -token is not
	// given.
	tokenEnv = "DROVER_TOKEN"
)

// clientOptions are the flags every client command shares.
type clientOptions struct {
	address  string
	timeout  time.Duration
	json     bool
	caFile   string
	certFile string
	keyFile  string
	token    string
	// flags is the flag set the options were defined on; deprecation
	// warnings go to its output.
	flags *flag.FlagSet
}

// clientFlags defines the shared client flags on fs. withJSON adds -json,
// which read commands (and writes that return something worth scripting
// against) offer.
func clientFlags(fs *flag.FlagSet, withJSON bool) *clientOptions {
	o := &clientOptions{}
	fs.StringVar(&o.address, "address", "", "gRPC address of a drover server (default: $"+addrEnv+", else "+defaultAddr+")")
	fs.DurationVar(&o.timeout, "timeout", defaultTimeout, "give up on the server after this long; 0 waits for ever")
	tlsFileFlags(fs, o)
	if withJSON {
		fs.BoolVar(&o.json, "json", false, "print the server's response as JSON instead of a table")
	}
	return o
}

// serverAddr resolves the server address: -address, else $DROVER_ADDR, else
// the default.
func (o *clientOptions) serverAddr() string {
	if o.address != "" {
		return o.address
	}
	if env := strings.TrimSpace(os.Getenv(addrEnv)); env != "" {
		return env
	}
	return defaultAddr
}

// tls resolves the TLS files: each flag, else its environment variable
// (else the variable's deprecated name). With none set the connection is
// plaintext.
func (o *clientOptions) tls() tlsconfig.Config {
	pick := func(flag, env, oldEnv string) string {
		if flag != "" {
			return flag
		}
		return envWithAlias(o.warnings(), env, oldEnv)
	}
	return tlsconfig.Config{
		CAFile:   pick(o.caFile, caFileEnv, oldCAFileEnv),
		CertFile: pick(o.certFile, certFileEnv, oldCertFileEnv),
		KeyFile:  pick(o.keyFile, keyFileEnv, oldKeyFileEnv),
	}
}

// warnings is where deprecation warnings go: the flag set's output
// (stderr), or os.Stderr for options made without one.
func (o *clientOptions) warnings() io.Writer {
	if o.flags == nil {
		return os.Stderr
	}
	return o.flags.Output()
}

// secret is the ACL token secret: -token, else $DROVER_TOKEN, else none.
func (o *clientOptions) secret() string {
	if o.token != "" {
		return o.token
	}
	return strings.TrimSpace(os.Getenv(tokenEnv))
}

// dial connects to a drover server for an operator command, sending the
// ACL token with every call, over TLS once any TLS file is set
// (incomplete settings are an error), else plaintext. A call that fails to
// connect carries its likely cause (connectionError), which report prints.
// agent and bench connect through simagent and loadgen instead, with the
// options of tlsDialOptions.
func (o *clientOptions) dial(addr string) (*grpc.ClientConn, error) {
	cfg := o.tls()
	var creds credentials.TransportCredentials = insecure.NewCredentials()
	if cfg.Enabled() {
		var err error
		if creds, err = cfg.ClientCredentials(); err != nil {
			return nil, err
		}
	}
	opts := append(rpc.ClientDialOptions(creds), explainConnectionErrors(addr, cfg.Enabled())...)
	if secret := o.secret(); secret != "" {
		opts = append(opts, grpc.WithPerRPCCredentials(rpc.TokenCredentials(secret)))
	}
	return grpc.NewClient(addr, opts...)
}

// callOperator connects to the server o names, makes one OperatorService
// call within o's timeout, and reports a failure to stderr as
// "Error <doing>: <message> (<code>)". The error it returns is then a
// reported one (see Reported).
func callOperator[Resp any](ctx context.Context, o *clientOptions, stderr io.Writer, doing string,
	call func(context.Context, droverv1.OperatorServiceClient) (Resp, error),
) (Resp, error) {
	var zero Resp
	addr := o.serverAddr()
	conn, err := o.dial(addr)
	if err != nil {
		return zero, report(stderr, "connecting to "+addr, err, 0)
	}
	defer conn.Close()
	if o.timeout > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, o.timeout)
		defer cancel()
	}
	resp, err := call(ctx, droverv1.NewOperatorServiceClient(conn))
	if err != nil {
		// The server gives up at the deadline it was sent, so it may answer
		// DeadlineExceeded a moment before ctx itself expires: compare the
		// clock with the deadline rather than asking ctx.
		var timeout time.Duration
		if deadline, ok := ctx.Deadline(); ok && !time.Now().Before(deadline) {
			timeout = o.timeout
		}
		return zero, report(stderr, doing, err, timeout)
	}
	return resp, nil
}

// reportedError is an error a command has already printed to stderr.
type reportedError struct {
	msg string
	err error
}

func (e *reportedError) Error() string { return e.msg }
func (e *reportedError) Unwrap() error { return e.err }

// Reported reports whether err, returned by a command, has already been
// printed to stderr in full. The caller should exit with status 1 without
// printing it again.
func Reported(err error) bool {
	var r *reportedError
	return errors.As(err, &r)
}

// report prints err to w the way every command reports a failed call:
//
//	Error listing raft peers: no leader (Unavailable)
//
// followed by the likely cause of a failure to connect (connectionError),
// the server's retry advice when the status carries RetryInfo, and a note
// when the call ran out of time (timeout > 0).
func report(w io.Writer, doing string, err error, timeout time.Duration) error {
	var msg string
	st, ok := status.FromError(err)
	if ok {
		msg = fmt.Sprintf("%s: %s (%s)", doing, st.Message(), st.Code())
	} else {
		msg = fmt.Sprintf("%s: %v", doing, err)
	}
	fmt.Fprintf(w, "Error %s\n", msg)
	printConnectionCause(w, err)
	if ok {
		for _, d := range st.Details() {
			if ri, isRetry := d.(*errdetails.RetryInfo); isRetry && ri.GetRetryDelay() != nil {
				fmt.Fprintf(w, "The server suggests retrying after %s.\n", ri.GetRetryDelay().AsDuration())
			}
		}
		if st.Code() == codes.DeadlineExceeded && timeout > 0 {
			fmt.Fprintf(w, "No answer within -timeout %s.\n", timeout)
		}
	}
	return &reportedError{msg: msg, err: err}
}

// jsonOptions print responses with the field names of the .proto files and
// every field present, zero or not, so scripts see a fixed set of keys.
var jsonOptions = protojson.MarshalOptions{UseProtoNames: true, EmitUnpopulated: true}

// printJSON writes m to w as indented JSON. protojson deliberately varies
// its whitespace from build to build, so its output is re-indented with
// encoding/json, which makes it byte-for-byte stable.
func printJSON(w io.Writer, m proto.Message) error {
	raw, err := marshalJSON(m)
	if err != nil {
		return err
	}
	var buf bytes.Buffer
	if err := json.Indent(&buf, raw, "", "  "); err != nil {
		return err
	}
	buf.WriteByte('\n')
	_, err = buf.WriteTo(w)
	return err
}

// newTable returns a writer that aligns tab-separated columns two spaces
// apart, as the Nomad and Consul CLIs print their tables. Flush it when done.
func newTable(w io.Writer) *tabwriter.Writer {
	return tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
}

// noArgs rejects positional arguments, which no client command takes.
func noArgs(args []string) error {
	if len(args) > 0 {
		return usageErrorf("unexpected arguments: %s", strings.Join(args, " "))
	}
	return nil
}

// groupExec is the Exec of a command that only groups subcommands: it
// prints the usage (by returning flag.ErrHelp). Run has already refused a
// word that names no subcommand.
func groupExec() func(context.Context, []string) error {
	return func(context.Context, []string) error { return flag.ErrHelp }
}
