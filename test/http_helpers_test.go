package test_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/grpc-ecosystem/grpc-gateway/v2/runtime"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"

	"github.com/droverhq/drover/server/httpapi"
	"github.com/droverhq/drover/test/cluster"
)

// httpArgs serve the HTTP API of every server on a free port.
func httpArgs() cluster.Option { return cluster.Args("-http-addr", "127.0.0.1:0") }

// apiCase is one HTTP call and the gRPC call it stands for.
type apiCase struct {
	method, path string
	// req is the HTTP call's message: its JSON is the body of a PUT or
	// POST, and what the path and query carry.
	req proto.Message
	// grpcReq is the gRPC call's request when it is not req (writes that
	// act on an object of their own).
	grpcReq proto.Message
	rpc     string
	resp    proto.Message
	// same says the two answers must be equal; otherwise only the codes
	// are compared.
	same bool
}

func (c apiCase) String() string { return c.method + " " + c.path }

// httpAnswer is what an HTTP call returned.
type httpAnswer struct {
	status int
	header http.Header
	body   []byte
}

// callHTTP makes a call with a plain HTTP client; token "" sends none.
func callHTTP(ctx context.Context, addr, method, path string, body []byte, header http.Header) (httpAnswer, error) {
	var r io.Reader
	if body != nil {
		r = bytes.NewReader(body)
	}
	req, err := http.NewRequestWithContext(ctx, method, "http://"+addr+path, r)
	if err != nil {
		return httpAnswer{}, err
	}
	for k, vs := range header {
		req.Header[k] = vs
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return httpAnswer{}, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		return httpAnswer{}, err
	}
	return httpAnswer{status: resp.StatusCode, header: resp.Header, body: b}, nil
}

func tokenHeader(secret string) http.Header {
	if secret == "" {
		return nil
	}
	return http.Header{httpapi.TokenHeader: {secret}}
}

var protoNames = protojson.MarshalOptions{UseProtoNames: true}

// outcome is one call's code and, when it succeeded, its answer.
type outcome struct {
	code codes.Code
	msg  proto.Message
	err  string
}

// runHTTP makes c's HTTP call and reads its answer or error body.
func runHTTP(ctx context.Context, addr string, c apiCase, header http.Header) (outcome, error) {
	var body []byte
	if c.method == http.MethodPut || c.method == http.MethodPost {
		var err error
		if body, err = protoNames.Marshal(c.req); err != nil {
			return outcome{}, err
		}
	}
	a, err := callHTTP(ctx, addr, c.method, c.path, body, header)
	if err != nil {
		return outcome{}, err
	}
	if a.status != http.StatusOK {
		var e httpapi.ErrorBody
		if err := json.Unmarshal(a.body, &e); err != nil {
			return outcome{}, fmt.Errorf("status %d, body %q: %w", a.status, a.body, err)
		}
		code := codes.Code(e.Code)
		if want := runtime.HTTPStatusFromCode(code); a.status != want {
			return outcome{}, fmt.Errorf("status %d for %s, want %d", a.status, code, want)
		}
		return outcome{code: code, err: e.Message}, nil
	}
	msg := c.resp.ProtoReflect().New().Interface()
	if err := protojson.Unmarshal(a.body, msg); err != nil {
		return outcome{}, fmt.Errorf("answer %q: %w", a.body, err)
	}
	return outcome{code: codes.OK, msg: msg}, nil
}

// runGRPC makes c's gRPC call.
func runGRPC(ctx context.Context, conn grpc.ClientConnInterface, c apiCase) outcome {
	req := c.req
	if c.grpcReq != nil {
		req = c.grpcReq
	}
	msg := c.resp.ProtoReflect().New().Interface()
	if err := conn.Invoke(ctx, c.rpc, req, msg); err != nil {
		st := status.Convert(err)
		return outcome{code: st.Code(), err: st.Message()}
	}
	return outcome{code: codes.OK, msg: msg}
}

// volatile are fields that legitimately differ between two calls made
// one after the other: how long ago the leader was heard from.
var volatile = map[protoreflect.Name]bool{"last_contact": true}

// normalize clears the volatile fields of m, at every depth.
func normalize(m protoreflect.Message) {
	m.Range(func(fd protoreflect.FieldDescriptor, v protoreflect.Value) bool {
		switch {
		case volatile[fd.Name()]:
			m.Clear(fd)
		case fd.IsList() && fd.Message() != nil:
			for i := 0; i < v.List().Len(); i++ {
				normalize(v.List().Get(i).Message())
			}
		case fd.IsMap() && fd.MapValue().Message() != nil:
			v.Map().Range(func(_ protoreflect.MapKey, mv protoreflect.Value) bool {
				normalize(mv.Message())
				return true
			})
		case fd.Message() != nil && !fd.IsList() && !fd.IsMap():
			normalize(v.Message())
		}
		return true
	})
}

// compare reports how two outcomes of a case differ, or "".
func compare(c apiCase, g, h outcome) string {
	if g.code != h.code {
		return fmt.Sprintf("gRPC %s (%s), HTTP %s (%s)", g.code, g.err, h.code, h.err)
	}
	if !c.same || g.code != codes.OK {
		return ""
	}
	normalize(g.msg.ProtoReflect())
	normalize(h.msg.ProtoReflect())
	if !proto.Equal(g.msg, h.msg) {
		return fmt.Sprintf("answers differ:\ngRPC %v\nHTTP %v", protoNames.Format(g.msg), protoNames.Format(h.msg))
	}
	return ""
}

// checkSame makes each case's call over gRPC on s and over HTTP on s's
// HTTP address with the same token, and fails the test unless they give
// the same code and, for cases that say so, the same answer. State that
// changes between the two calls (a scheduler finishing) is waited out.
func checkSame(ctx context.Context, t *testing.T, s *cluster.Server, secret string, cases []apiCase) {
	t.Helper()
	addr := s.Info().HTTPAddr
	gctx := ctx
	if secret != "" {
		gctx = as(ctx, secret)
	}
	for _, c := range cases {
		// Two calls made one after the other agree within moments.
		ctx, cancel := context.WithTimeout(ctx, 15*time.Second)
		defer cancel()
		poll(ctx, t, fmt.Sprintf("%s on %s answered as %s", c, s, c.rpc), func() (bool, string) {
			g := runGRPC(gctx, s.Conn(), c)
			h, err := runHTTP(ctx, addr, c, tokenHeader(secret))
			if err != nil {
				return false, err.Error()
			}
			diff := compare(c, g, h)
			return diff == "", diff
		})
	}
}

// checkCodes makes each case's call over gRPC and HTTP with secret and
// fails the test unless both give the same code; it returns the codes.
func checkCodes(ctx context.Context, t *testing.T, s *cluster.Server, secret string, cases []apiCase) map[string]codes.Code {
	t.Helper()
	got := map[string]codes.Code{}
	for _, c := range cases {
		c.same = false
		g := runGRPC(as(ctx, secret), s.Conn(), c)
		h, err := runHTTP(ctx, s.Info().HTTPAddr, c, tokenHeader(secret))
		if err != nil {
			t.Errorf("%s: %v", c, err)
			continue
		}
		if diff := compare(c, g, h); diff != "" {
			t.Errorf("%s with token %q: %s", c, secret, diff)
		}
		got[c.String()] = h.code
	}
	return got
}

// checkOpenAPI fetches /v1/openapi.json and fails the test unless every
// method and path it names was called by one of cases, so that no mapped
// path goes untested.
func checkOpenAPI(ctx context.Context, t *testing.T, s *cluster.Server, cases ...[]apiCase) {
	t.Helper()
	a, err := callHTTP(ctx, s.Info().HTTPAddr, http.MethodGet, "/v1/openapi.json", nil, nil)
	if err != nil || a.status != http.StatusOK {
		t.Fatalf("GET /v1/openapi.json: %v %d", err, a.status)
	}
	var doc struct {
		Paths map[string]map[string]json.RawMessage `json:"paths"`
	}
	if err := json.Unmarshal(a.body, &doc); err != nil {
		t.Fatalf("openapi.json: %v", err)
	}
	if len(doc.Paths) == 0 {
		t.Fatal("openapi.json names no paths")
	}
	for tmpl, methods := range doc.Paths {
		segments := strings.Split(tmpl, "/")
		for i, seg := range segments {
			if strings.HasPrefix(seg, "{") {
				segments[i] = `[^/]+`
			} else {
				segments[i] = regexp.QuoteMeta(seg)
			}
		}
		re := regexp.MustCompile("^" + strings.Join(segments, "/") + "$")
		for method := range methods {
			if !called(cases, strings.ToUpper(method), re) {
				t.Errorf("openapi.json names %s %s, which no test calls", strings.ToUpper(method), tmpl)
			}
		}
	}
}

func called(cases [][]apiCase, method string, path *regexp.Regexp) bool {
	for _, cs := range cases {
		for _, c := range cs {
			p, _, _ := strings.Cut(c.path, "?")
			if c.method == method && path.MatchString(p) {
				return true
			}
		}
	}
	return false
}
