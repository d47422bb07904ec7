package rpc

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"

	"github.com/droverhq/drover/internal/audit"
)

// AuditLog receives the audit trail's entries (internal/audit.Log).
type AuditLog interface {
	// Write returns once the entry is written.
	Write(e audit.Entry) error
}

// auditor records every write call and every refused call. It runs outside
// the enforcer, so that it sees refusals, and around the forwarder, so that
// a forwarded write is recorded with the index the leader committed it at.
type auditor struct {
	log AuditLog
}

// callRecord is filled in deeper in the chain, by the enforcer, with who
// the caller turned out to be.
type callRecord struct{ accessor string }

type callRecordKey struct{}

// recordCaller notes the caller's accessor for the audit trail, if the
// call is audited.
func recordCaller(ctx context.Context, accessor string) {
	if rec, ok := ctx.Value(callRecordKey{}).(*callRecord); ok {
		rec.accessor = accessor
	}
}

// quietStatus maps errors to statuses without logging them: the
// interceptor outside does that.
var quietStatus = slog.New(slog.NewTextHandler(io.Discard, nil))

func (a auditor) unary(ctx context.Context, req any, info *grpc.UnaryServerInfo, handler grpc.UnaryHandler) (any, error) {
	if a.log == nil {
		return handler(ctx, req)
	}
	rec := &callRecord{}
	resp, err := handler(context.WithValue(ctx, callRecordKey{}, rec), req)
	if !a.wanted(info.FullMethod, err) {
		return resp, err
	}
	e := a.entry(ctx, rec, info.FullMethod, req, err)
	if ix, ok := resp.(interface{ GetIndex() uint64 }); ok && err == nil {
		e.Index = ix.GetIndex()
	}
	if werr := a.log.Write(e); werr != nil {
		if err == nil {
			// Committed, but not to be acknowledged unrecorded.
			return nil, fmt.Errorf("%s committed at index %d, but its audit line could not be written: %v: %w",
				info.FullMethod, e.Index, werr, ErrUnavailable)
		}
		return nil, err
	}
	return resp, err
}

func (a auditor) stream(srv any, ss grpc.ServerStream, info *grpc.StreamServerInfo, handler grpc.StreamHandler) error {
	if a.log == nil {
		return handler(srv, ss)
	}
	rec := &callRecord{}
	err := handler(srv, &contextStream{ServerStream: ss, ctx: context.WithValue(ss.Context(), callRecordKey{}, rec)})
	if !a.wanted(info.FullMethod, err) {
		return err
	}
	if werr := a.log.Write(a.entry(ss.Context(), rec, info.FullMethod, nil, err)); werr != nil {
		return fmt.Errorf("%w (and its audit line could not be written: %v)", err, werr)
	}
	return err
}

// wanted reports whether a call is audited: writes, except the servers'
// own calls to each other (each follows from an audited call), and every
// refused call.
func (a auditor) wanted(method string, err error) bool {
	r := accessRules[method]
	return (r.write && r.caller != callerServer) || refused(err)
}

// refused reports whether err refuses a call for who made it.
func refused(err error) bool {
	switch status.Code(toStatus(err, quietStatus)) {
	case codes.PermissionDenied, codes.Unauthenticated:
		return true
	}
	return false
}

// entry builds the audit line of a call.
func (a auditor) entry(ctx context.Context, rec *callRecord, method string, req any, err error) audit.Entry {
	st := status.Convert(toStatus(err, quietStatus))
	e := audit.Entry{Time: time.Now().UTC(), Accessor: rec.accessor, Method: method, Code: st.Code().String()}
	if err != nil {
		e.Message = st.Message()
	}
	if e.Accessor == "" {
		e.Accessor = accessorAnonymous
		if n, ok := req.(interface{ GetNodeId() string }); ok && accessRules[method].caller == callerNode {
			e.Accessor = "node:" + n.GetNodeId()
		}
	}
	e.Peer = peerAddr(ctx)
	if m, ok := req.(proto.Message); ok {
		e.IDs = audit.RequestIDs(m)
	}
	return e
}

// contextStream is a server stream with another context.
type contextStream struct {
	grpc.ServerStream
	ctx context.Context
}

func (s *contextStream) Context() context.Context { return s.ctx }
