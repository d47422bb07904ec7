package rpc

import (
	"context"
	"math/rand/v2"
	"time"

	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// maxRefusalRetries bounds how often a client asks again after refusals,
// for calls without a deadline.
const maxRefusalRetries = 10

// NoRefusalRetry is a call option that turns off the retry of refused
// calls, for a caller that counts refusals itself (the flood benchmark).
type NoRefusalRetry struct{ grpc.EmptyCallOption }

// retryRefused is the client side of the servers' admission limits: a
// unary call refused RESOURCE_EXHAUSTED with a retry hint did nothing on
// the server (admission refuses before any work), so it is asked again
// after the hint, less a random quarter so that callers refused together
// do not return together, for as long as the call's deadline leaves time.
// A refusal without a hint (a lagging event subscription) and every other
// error are returned as they are.
func retryRefused(ctx context.Context, method string, req, reply any, cc *grpc.ClientConn, invoker grpc.UnaryInvoker, opts ...grpc.CallOption) error {
	for _, o := range opts {
		if _, off := o.(NoRefusalRetry); off {
			return invoker(ctx, method, req, reply, cc, opts...)
		}
	}
	for tries := 1; ; tries++ {
		err := invoker(ctx, method, req, reply, cc, opts...)
		hint, refused := refusalHint(err)
		if !refused || tries > maxRefusalRetries {
			return err
		}
		wait := hint - rand.N(hint/4+1)
		if deadline, ok := ctx.Deadline(); ok && time.Until(deadline) <= wait {
			return err
		}
		t := time.NewTimer(wait)
		select {
		case <-ctx.Done():
			t.Stop()
			return err
		case <-t.C:
		}
	}
}

// refusalHint reports whether err is an admission refusal
// (RESOURCE_EXHAUSTED carrying RetryInfo) and the delay it asks for.
func refusalHint(err error) (time.Duration, bool) {
	if status.Code(err) != codes.ResourceExhausted {
		return 0, false
	}
	return RetryHint(err)
}

// RetryHint returns the delay a server asked for with its error (gRPC
// RetryInfo, as drover sends with UNAVAILABLE and RESOURCE_EXHAUSTED), and
// whether it asked at all.
func RetryHint(err error) (time.Duration, bool) {
	for _, d := range status.Convert(err).Details() {
		if ri, ok := d.(*errdetails.RetryInfo); ok && ri.GetRetryDelay() != nil {
			return max(ri.GetRetryDelay().AsDuration(), 0), true
		}
	}
	return 0, false
}
