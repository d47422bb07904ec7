package httpapi

import (
	"context"
	"fmt"
	"net/http"

	"github.com/grpc-ecosystem/grpc-gateway/v2/runtime"
	"google.golang.org/grpc"
	"google.golang.org/protobuf/encoding/protojson"

	droverv1 "github.com/droverhq/drover/proto/drover/v1"
)

// marshaler writes and reads protobuf's JSON mapping with the fields'
// proto names (job_id, not jobId), as the protos spell them, and leaves out
// fields at their zero value. A body field the message does not have is an
// error, so that a misspelt field is not silently dropped.
func marshaler() runtime.Marshaler {
	return &runtime.HTTPBodyMarshaler{Marshaler: compactJSON{JSONPb: &runtime.JSONPb{
		MarshalOptions:   protojson.MarshalOptions{UseProtoNames: true},
		UnmarshalOptions: protojson.UnmarshalOptions{},
	}}}
}

// compactJSON writes JSON without insignificant spaces. protojson adds
// spaces at random (differently in every build) so that nobody relies on
// its exact bytes; an HTTP API's answers are compared and grepped by
// people, so it gives the same bytes for the same answer.
type compactJSON struct {
	*runtime.JSONPb
}

// Marshal is JSONPb's, compacted.
func (c compactJSON) Marshal(v any) ([]byte, error) {
	b, err := c.JSONPb.Marshal(v)
	if err != nil {
		return nil, err
	}
	return compact(b), nil
}

// compact removes the spaces and line breaks outside strings from valid
// JSON, in place. It is several times faster than json.Compact, which
// also validates what protojson already wrote correctly.
func compact(b []byte) []byte {
	out := b[:0]
	inString, escaped := false, false
	for _, c := range b {
		switch {
		case inString:
			switch {
			case escaped:
				escaped = false
			case c == '\\':
				escaped = true
			case c == '"':
				inString = false
			}
		case c == ' ' || c == '\n' || c == '\t' || c == '\r':
			continue
		case c == '"':
			inString = true
		}
		out = append(out, c)
	}
	return out
}

// registrations are the services the HTTP API serves, each a generated
// registration of its handlers. ClusterService and SchedulerService are
// not among them: servers call them, not operators.
func registrations() []func(context.Context, *runtime.ServeMux, *grpc.ClientConn) error {
	return []func(context.Context, *runtime.ServeMux, *grpc.ClientConn) error{
		droverv1.RegisterJobServiceHandler,
		droverv1.RegisterNodeServiceHandler,
		droverv1.RegisterAllocServiceHandler,
		droverv1.RegisterEvalServiceHandler,
		droverv1.RegisterDeploymentServiceHandler,
		droverv1.RegisterEventServiceHandler,
		droverv1.RegisterOperatorServiceHandler,
		droverv1.RegisterACLServiceHandler,
	}
}

// newGateway builds the generated handlers of every operator-facing
// service on conn.
func newGateway(ctx context.Context, conn *grpc.ClientConn) (http.Handler, error) {
	mux := runtime.NewServeMux(
		runtime.WithMarshalerOption(runtime.MIMEWildcard, marshaler()),
		runtime.WithIncomingHeaderMatcher(incomingHeader),
		runtime.WithOutgoingHeaderMatcher(outgoingHeader),
		runtime.WithForwardResponseOption(indexHeaders),
		runtime.WithErrorHandler(gatewayError),
		runtime.WithRoutingErrorHandler(routingError),
		runtime.WithMetadata(clientAddr),
	)
	for _, register := range registrations() {
		if err := register(ctx, mux, conn); err != nil {
			return nil, fmt.Errorf("register HTTP handlers: %w", err)
		}
	}
	return mux, nil
}
