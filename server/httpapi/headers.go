package httpapi

import (
	"context"
	"net/http"
	"net/textproto"
	"strconv"

	"google.golang.org/grpc/metadata"
	"google.golang.org/protobuf/proto"

	droverv1 "github.com/droverhq/drover/proto/drover/v1"
	"github.com/droverhq/drover/rpc"
)

// Headers of the HTTP API.
const (
	// TokenHeader carries the caller's token secret; "Authorization:
	// Bearer <secret>" does too.
	TokenHeader = "X-Drover-Token"
	// IndexHeader is the raft index an answer reflects: pass it back as
	// ?index= to block until something changes.
	IndexHeader = "X-Drover-Index"
	// KnownLeaderHeader says whether the answering server knew a leader.
	KnownLeaderHeader = "X-Drover-KnownLeader"
	// LastContactHeader is, in milliseconds, how long ago the answering
	// server last heard from the leader (0 on the leader).
	LastContactHeader = "X-Drover-LastContact"
)

// incomingHeader says which request headers become gRPC metadata: the
// token only. Everything else stays behind, above all the metadata servers
// trust from each other (drover-as-server, forwarding hops), which an HTTP
// client must never be able to set. The gateway passes Authorization on by
// itself, which the gRPC server reads as a bearer token.
func incomingHeader(key string) (string, bool) {
	if textproto.CanonicalMIMEHeaderKey(key) == TokenHeader {
		return rpc.TokenMetadataKey, true
	}
	return "", false
}

// clientAddr names the HTTP client in the call's metadata, for the audit
// trail. The gateway's annotations replace any header of the same name.
func clientAddr(_ context.Context, r *http.Request) metadata.MD {
	return metadata.Pairs(rpc.HTTPPeerMetadataKey, r.RemoteAddr)
}

// outgoingHeader passes no response metadata on as headers: the services
// send none meant for HTTP clients.
func outgoingHeader(string) (string, bool) { return "", false }

type withMeta interface {
	GetMeta() *droverv1.QueryMeta
}

type withIndex interface {
	GetIndex() uint64
}

// indexHeaders sets X-Drover-Index (and, for reads, whether a leader was
// known and when it was last heard from) from an answer, before its body is
// written.
func indexHeaders(_ context.Context, w http.ResponseWriter, m proto.Message) error {
	h := w.Header()
	if r, ok := m.(withMeta); ok && r.GetMeta() != nil {
		meta := r.GetMeta()
		h.Set(IndexHeader, strconv.FormatUint(meta.GetIndex(), 10))
		h.Set(KnownLeaderHeader, strconv.FormatBool(meta.GetKnownLeader()))
		h.Set(LastContactHeader, strconv.FormatInt(meta.GetLastContact().AsDuration().Milliseconds(), 10))
		return nil
	}
	if r, ok := m.(withIndex); ok && r.GetIndex() > 0 {
		h.Set(IndexHeader, strconv.FormatUint(r.GetIndex(), 10))
	}
	return nil
}
