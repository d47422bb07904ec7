package cli

import (
	"context"
	"fmt"
	"io"
	"time"

	"google.golang.org/grpc"
)

// session is one command's connection to a server, for commands that make
// more than one call. Every call shares the connection and the command's
// -timeout, which bounds the command as a whole.
type session struct {
	opts   *clientOptions
	stderr io.Writer
	conn   *grpc.ClientConn
}

// openSession connects to the server o names. The context it returns ends
// at the -timeout deadline; close releases it and the connection.
func openSession(ctx context.Context, o *clientOptions, stderr io.Writer) (context.Context, *session, func(), error) {
	addr := o.serverAddr()
	conn, err := o.dial(addr)
	if err != nil {
		return nil, nil, nil, report(stderr, "connecting to "+addr, err, 0)
	}
	cancel := context.CancelFunc(func() {})
	if o.timeout > 0 {
		ctx, cancel = context.WithTimeout(ctx, o.timeout)
	}
	return ctx, &session{opts: o, stderr: stderr, conn: conn}, func() {
		cancel()
		_ = conn.Close()
	}, nil
}

// fail reports a failed call as callOperator does, with a note when the
// -timeout deadline has passed. The error it returns is a reported one.
func (s *session) fail(ctx context.Context, doing string, err error) error {
	return report(s.stderr, doing, err, s.timedOut(ctx))
}

// timedOut is the -timeout when ctx's deadline has passed, else zero. The
// server gives up at the deadline it was sent, so it may answer
// DeadlineExceeded a moment before ctx itself expires: compare the clock
// with the deadline rather than asking ctx.
func (s *session) timedOut(ctx context.Context) time.Duration {
	if deadline, ok := ctx.Deadline(); ok && !time.Now().Before(deadline) {
		return s.opts.timeout
	}
	return 0
}

// allPages collects every page of a list: it calls list with each page's
// next token until a page comes back without one.
func allPages[T any](ctx context.Context, list func(ctx context.Context, token string) ([]T, string, error)) ([]T, error) {
	var all []T
	token := ""
	for {
		items, next, err := list(ctx, token)
		if err != nil {
			return nil, err
		}
		all = append(all, items...)
		if next == "" {
			return all, nil
		}
		if next == token {
			return nil, fmt.Errorf("the server returned page token %q twice", next)
		}
		token = next
	}
}
