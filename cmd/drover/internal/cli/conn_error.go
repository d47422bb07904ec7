package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/droverhq/drover/internal/tlsconfig"
)

// connectionError is a call that failed before it reached the server,
// with the likely cause in words: gRPC reports such failures only as
// UNAVAILABLE with the transport's text ("error reading server preface:
// EOF"), which does not tell an operator what to change. It keeps the
// call's status, so everything reading the status sees it unchanged.
type connectionError struct {
	err   error
	cause string
}

func (e *connectionError) Error() string { return e.err.Error() }
func (e *connectionError) Unwrap() error { return e.err }

// GRPCStatus is the failed call's own status.
func (e *connectionError) GRPCStatus() *status.Status { return status.Convert(e.err) }

// printConnectionCause prints the likely cause err carries, if any, on its
// own line after the error report.
func printConnectionCause(w io.Writer, err error) {
	var ce *connectionError
	if errors.As(err, &ce) {
		fmt.Fprintln(w, ce.cause)
	}
}

// explainConnectionErrors are the dial options that attach the likely
// cause to a call failing for a connection to addr, made with TLS or not.
func explainConnectionErrors(addr string, withTLS bool) []grpc.DialOption {
	explain := func(err error) error {
		if cause := connectionCause(err, addr, withTLS); cause != "" {
			return &connectionError{err: err, cause: cause}
		}
		return err
	}
	return []grpc.DialOption{
		grpc.WithChainUnaryInterceptor(func(ctx context.Context, method string, req, reply any, cc *grpc.ClientConn, invoker grpc.UnaryInvoker, opts ...grpc.CallOption) error {
			return explain(invoker(ctx, method, req, reply, cc, opts...))
		}),
		grpc.WithChainStreamInterceptor(func(ctx context.Context, desc *grpc.StreamDesc, cc *grpc.ClientConn, method string, streamer grpc.Streamer, opts ...grpc.CallOption) (grpc.ClientStream, error) {
			s, err := streamer(ctx, desc, cc, method, opts...)
			return s, explain(err)
		}),
	}
}

// connectionCause names the likely cause of a call that failed to connect
// to addr, or "" when err is not such a failure or its cause is not one of
// the common ones. gRPC keeps only the transport error's text in the
// status, so the text is what is matched.
func connectionCause(err error, addr string, withTLS bool) string {
	st, ok := status.FromError(err)
	if err == nil || !ok || st.Code() != codes.Unavailable {
		return ""
	}
	msg := st.Message()
	has := func(parts ...string) bool {
		for _, p := range parts {
			if strings.Contains(msg, p) {
				return true
			}
		}
		return false
	}
	switch {
	case has("connection refused"):
		return fmt.Sprintf("Nothing is listening at %s: is the server running, and is -address (or $%s) right?", addr, addrEnv)
	case has("no such host", "produced zero addresses"):
		return fmt.Sprintf("The host of %s does not resolve: check -address (or $%s).", addr, addrEnv)
	case has("first record does not look like a TLS handshake"):
		return fmt.Sprintf("The server at %s does not use TLS, but this command does: drop -tls-ca-file, -tls-cert-file and -tls-key-file (and $%s, $%s, $%s), or give the server its TLS files.", addr, caFileEnv, certFileEnv, keyFileEnv)
	case has("certificate is valid for"):
		return fmt.Sprintf("The server at %s presents a certificate that is not a drover server's: it must name the DNS host %s.", addr, tlsconfig.ServerName)
	case has("certificate signed by unknown authority", "failed to verify certificate"):
		return fmt.Sprintf("The certificate of the server at %s is not signed by the CA in -tls-ca-file: is it the right CA file, and the right cluster?", addr)
	case !withTLS && has("error reading server preface", "EOF", "connection reset by peer"):
		return fmt.Sprintf("The server at %s closed the connection before speaking gRPC: it most likely requires TLS. Give -tls-ca-file, -tls-cert-file and -tls-key-file (or $%s, $%s, $%s).", addr, caFileEnv, certFileEnv, keyFileEnv)
	case withTLS && has("remote error: tls", "broken pipe", "connection reset by peer", "EOF"):
		return fmt.Sprintf("The server at %s ended the TLS connection: it most likely refused this command's client certificate (none given, or not signed by the cluster's CA). Check -tls-cert-file and -tls-key-file.", addr)
	}
	return ""
}
