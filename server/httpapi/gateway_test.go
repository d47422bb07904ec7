package httpapi

import (
	"context"
	"encoding/json"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/durationpb"

	droverv1 "github.com/droverhq/drover/proto/drover/v1"
	"github.com/droverhq/drover/rpc"
)

// fakeJobs answers JobService calls from a table and records what it got.
type fakeJobs struct {
	droverv1.UnimplementedJobServiceServer
	md      chan metadata.MD
	list    chan *droverv1.ListJobsRequest
	entered chan struct{}
}

func (f *fakeJobs) List(ctx context.Context, req *droverv1.ListJobsRequest) (*droverv1.ListJobsResponse, error) {
	md, _ := metadata.FromIncomingContext(ctx)
	f.md <- md
	f.list <- req
	if req.GetQuery().GetMinIndex() == 1000 {
		// A blocking query that waits for a change that never comes.
		close(f.entered)
		<-ctx.Done()
		return nil, status.FromContextError(ctx.Err()).Err()
	}
	return &droverv1.ListJobsResponse{
		Jobs: []*droverv1.Job{{Id: "web"}},
		Meta: &droverv1.QueryMeta{Index: req.GetQuery().GetMinIndex() + 1, KnownLeader: true, LastContact: durationpb.New(1500 * time.Millisecond)},
	}, nil
}

func (f *fakeJobs) Get(_ context.Context, req *droverv1.GetJobRequest) (*droverv1.GetJobResponse, error) {
	withDetail := func(c codes.Code, d *errdetails.RetryInfo) error {
		st, err := status.New(c, "refused").WithDetails(d)
		if err != nil {
			return err
		}
		return st.Err()
	}
	switch req.GetJobId() {
	case "missing":
		return nil, status.Error(codes.NotFound, `job "missing": not found`)
	case "bad":
		st, err := status.New(codes.InvalidArgument, "invalid").WithDetails(&errdetails.BadRequest{
			FieldViolations: []*errdetails.BadRequest_FieldViolation{{Field: "job.id", Description: "is required"}}})
		if err != nil {
			return nil, err
		}
		return nil, st.Err()
	case "anonymous":
		return nil, status.Error(codes.Unauthenticated, "needs a token")
	case "denied":
		return nil, status.Error(codes.PermissionDenied, "denied")
	case "halted":
		return nil, status.Error(codes.FailedPrecondition, "halted")
	case "busy":
		return nil, withDetail(codes.ResourceExhausted, &errdetails.RetryInfo{RetryDelay: durationpb.New(1500 * time.Millisecond)})
	case "election":
		return nil, withDetail(codes.Unavailable, &errdetails.RetryInfo{RetryDelay: durationpb.New(3 * time.Second)})
	}
	return &droverv1.GetJobResponse{Job: &droverv1.Job{Id: req.GetJobId()}, Meta: &droverv1.QueryMeta{Index: 42}}, nil
}

func (f *fakeJobs) Deregister(_ context.Context, req *droverv1.DeregisterJobRequest) (*droverv1.DeregisterJobResponse, error) {
	return &droverv1.DeregisterJobResponse{EvalId: "e-" + req.GetJobId(), Index: 9}, nil
}

// startFake serves fakeJobs on an in-memory gRPC server and returns the
// HTTP server in front of it.
func startFake(t *testing.T) (*Server, *fakeJobs) {
	t.Helper()
	fake := &fakeJobs{md: make(chan metadata.MD, 1), list: make(chan *droverv1.ListJobsRequest, 1), entered: make(chan struct{})}
	gs := grpc.NewServer()
	droverv1.RegisterJobServiceServer(gs, fake)
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go func() { _ = gs.Serve(l) }()
	t.Cleanup(gs.Stop)
	conn, err := grpc.NewClient(l.Addr().String(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = conn.Close() })
	s, err := Listen(t.Context(), Config{Addr: "127.0.0.1:0", Conn: conn, MaxBodyBytes: 1 << 10})
	if err != nil {
		t.Fatal(err)
	}
	go func() { _ = s.Serve() }()
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = s.Shutdown(ctx)
	})
	return s, fake
}

func do(t *testing.T, req *http.Request) (*http.Response, []byte) {
	t.Helper()
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp, body
}

func newRequest(t *testing.T, method, url string, body io.Reader) *http.Request {
	t.Helper()
	req, err := http.NewRequestWithContext(t.Context(), method, url, body)
	if err != nil {
		t.Fatal(err)
	}
	return req
}

// TestTokenHeadersOnly checks that the token headers reach the service as
// metadata and that no other header does, above all those servers trust
// from each other.
func TestTokenHeadersOnly(t *testing.T) {
	s, fake := startFake(t)
	tests := []struct {
		name   string
		header http.Header
		want   map[string]string
	}{
		{name: "X-Drover-Token", header: http.Header{"X-Drover-Token": {"s1"}}, want: map[string]string{"x-drover-token": "s1"}},
		{name: "lower case", header: http.Header{"x-drover-token": {"s2"}}, want: map[string]string{"x-drover-token": "s2"}},
		{name: "Authorization", header: http.Header{"Authorization": {"Bearer s3"}}, want: map[string]string{"authorization": "Bearer s3"}},
		{name: "forged", header: http.Header{
			"Drover-As-Server":                  {"1"},
			"Grpc-Metadata-Drover-As-Server":    {"1"},
			"Drover-Forward-Hops":               {"0"},
			"Grpc-Metadata-Drover-Forward-Hops": {"0"},
			"Grpc-Metadata-X-Drover-Token":      {"forged"},
			"X-Other":                           {"x"},
		}, want: map[string]string{}},
	}
	trusted := []string{"drover-as-server", "drover-forward-hops", "drover-forward-deadline", "x-other"}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			req := newRequest(t, "GET", "http://"+s.Addr()+"/v1/jobs", nil)
			for k, vs := range tt.header {
				for _, v := range vs {
					req.Header.Add(k, v)
				}
			}
			resp, body := do(t, req)
			if resp.StatusCode != http.StatusOK {
				t.Fatalf("status %d: %s", resp.StatusCode, body)
			}
			md := <-fake.md
			<-fake.list
			for k, v := range tt.want {
				if got := md.Get(k); len(got) != 1 || got[0] != v {
					t.Errorf("metadata %s = %q, want %q", k, got, v)
				}
			}
			if _, ok := tt.want["x-drover-token"]; !ok && len(md.Get("x-drover-token")) > 0 {
				t.Errorf("token metadata %q from no token header", md.Get("x-drover-token"))
			}
			if got := md.Get(rpc.HTTPPeerMetadataKey); len(got) != 1 || !strings.HasPrefix(got[0], "127.0.0.1:") {
				t.Errorf("HTTP client address %q, want the connection's", got)
			}
			for _, k := range trusted {
				if got := md.Get(k); len(got) > 0 {
					t.Errorf("header reached the service as %s=%q", k, got)
				}
			}
		})
	}
}

// TestQueryAndIndexHeaders checks that Nomad's query parameters reach the
// request and that the answer's meta becomes headers.
func TestQueryAndIndexHeaders(t *testing.T) {
	s, fake := startFake(t)
	resp, body := do(t, newRequest(t, "GET", "http://"+s.Addr()+"/v1/jobs?index=5&wait=2s&stale&prefix=w&per_page=3", nil))
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("status %d: %s", resp.StatusCode, body)
	}
	<-fake.md
	req := <-fake.list
	q := req.GetQuery()
	if q.GetMinIndex() != 5 || q.GetMaxWait().AsDuration() != 2*time.Second || !q.GetAllowStale() {
		t.Errorf("query options %v", q)
	}
	if req.GetPage().GetPrefix() != "w" || req.GetPage().GetPageSize() != 3 {
		t.Errorf("page options %v", req.GetPage())
	}
	for h, want := range map[string]string{IndexHeader: "6", KnownLeaderHeader: "true", LastContactHeader: "1500"} {
		if got := resp.Header.Get(h); got != want {
			t.Errorf("%s: %q, want %q", h, got, want)
		}
	}
	var got map[string]any
	if err := json.Unmarshal(body, &got); err != nil {
		t.Fatal(err)
	}
	if strings.Contains(string(body), " ") {
		t.Errorf("body not compact: %s", body)
	}
	if _, ok := got["known_leader"]; ok {
		t.Errorf("body not nested as the message is: %s", body)
	}
	if meta, _ := got["meta"].(map[string]any); meta["known_leader"] != true {
		t.Errorf("body without proto field names: %s", body)
	}

	// A write's index field becomes the header too.
	resp, body = do(t, newRequest(t, "DELETE", "http://"+s.Addr()+"/v1/job/web", nil))
	if resp.StatusCode != http.StatusOK || resp.Header.Get(IndexHeader) != "9" || !strings.Contains(string(body), `"eval_id":`) {
		t.Errorf("deregister: status %d, %s %q, body %s", resp.StatusCode, IndexHeader, resp.Header.Get(IndexHeader), body)
	}
}

// TestErrors checks the HTTP status, body and headers of errors.
func TestErrors(t *testing.T) {
	s, _ := startFake(t)
	tests := []struct {
		method, path string
		body         string
		status       int
		code         codes.Code
		header       map[string]string
		detail       string
	}{
		{method: "GET", path: "/v1/job/missing", status: 404, code: codes.NotFound},
		{method: "GET", path: "/v1/job/bad", status: 400, code: codes.InvalidArgument, detail: "google.rpc.BadRequest"},
		{method: "GET", path: "/v1/job/anonymous", status: 401, code: codes.Unauthenticated, header: map[string]string{"WWW-Authenticate": `Bearer realm="drover"`}},
		{method: "GET", path: "/v1/job/denied", status: 403, code: codes.PermissionDenied},
		{method: "GET", path: "/v1/job/halted", status: 400, code: codes.FailedPrecondition},
		{method: "GET", path: "/v1/job/busy", status: 429, code: codes.ResourceExhausted, header: map[string]string{"Retry-After": "2"}, detail: "google.rpc.RetryInfo"},
		{method: "GET", path: "/v1/job/election", status: 503, code: codes.Unavailable, header: map[string]string{"Retry-After": "3"}},
		{method: "GET", path: "/v1/evaluations", status: 501, code: codes.Unimplemented},
		{method: "GET", path: "/v1/nowhere", status: 404, code: codes.NotFound},
		{method: "PATCH", path: "/v1/jobs", status: 405, code: codes.Unimplemented},
		{method: "GET", path: "/v1/jobs?index=soon", status: 400, code: codes.InvalidArgument},
		{method: "PUT", path: "/v1/jobs", body: `{"jobb":{}}`, status: 400, code: codes.InvalidArgument},
		{method: "PUT", path: "/v1/jobs", body: `{"job":{"id":"` + strings.Repeat("x", 2<<10) + `"}}`, status: 413, code: codes.InvalidArgument},
	}
	for _, tt := range tests {
		t.Run(tt.method+" "+tt.path, func(t *testing.T) {
			var body io.Reader
			if tt.body != "" {
				body = strings.NewReader(tt.body)
			}
			resp, raw := do(t, newRequest(t, tt.method, "http://"+s.Addr()+tt.path, body))
			if resp.StatusCode != tt.status {
				t.Fatalf("status %d, want %d: %s", resp.StatusCode, tt.status, raw)
			}
			if ct := resp.Header.Get("Content-Type"); ct != "application/json" {
				t.Errorf("Content-Type %q", ct)
			}
			var got ErrorBody
			if err := json.Unmarshal(raw, &got); err != nil {
				t.Fatalf("body %s: %v", raw, err)
			}
			if codes.Code(got.Code) != tt.code || got.Error != codeName(tt.code) || got.Message == "" {
				t.Errorf("body %s, want code %d (%s)", raw, tt.code, codeName(tt.code))
			}
			for h, want := range tt.header {
				if v := resp.Header.Get(h); v != want {
					t.Errorf("%s: %q, want %q", h, v, want)
				}
			}
			if tt.detail != "" && (len(got.Details) != 1 || !strings.Contains(string(got.Details[0]), tt.detail)) {
				t.Errorf("details %s, want a %s", got.Details, tt.detail)
			}
		})
	}
}

// TestCrossOriginWritesRefused checks that a browser cannot be made to
// write for a page of another site, while reads and programs go through.
func TestCrossOriginWritesRefused(t *testing.T) {
	s, fake := startFake(t)
	tests := []struct {
		method, path string
		header       http.Header
		status       int
	}{
		{"DELETE", "/v1/job/web", http.Header{"Sec-Fetch-Site": {"cross-site"}}, http.StatusForbidden},
		{"DELETE", "/v1/job/web", http.Header{"Origin": {"https://evil.example"}}, http.StatusForbidden},
		{"DELETE", "/v1/job/web", http.Header{"Sec-Fetch-Site": {"same-origin"}}, http.StatusOK},
		{"DELETE", "/v1/job/web", nil, http.StatusOK},
		{"GET", "/v1/jobs", http.Header{"Sec-Fetch-Site": {"cross-site"}}, http.StatusOK},
	}
	for _, tt := range tests {
		req := newRequest(t, tt.method, "http://"+s.Addr()+tt.path, nil)
		for k, v := range tt.header {
			req.Header[k] = v
		}
		resp, body := do(t, req)
		if resp.StatusCode != tt.status {
			t.Errorf("%s %s with %v: %d %s, want %d", tt.method, tt.path, tt.header, resp.StatusCode, body, tt.status)
		}
		if tt.method == "GET" && resp.StatusCode == http.StatusOK {
			<-fake.md
			<-fake.list
		}
	}
}

// TestShutdownEndsBlockingQueries checks that a blocking query does not
// hold the server's shutdown up.
func TestShutdownEndsBlockingQueries(t *testing.T) {
	s, fake := startFake(t)
	done := make(chan *http.Response, 1)
	go func() {
		resp, err := http.DefaultClient.Do(newRequest(t, "GET", "http://"+s.Addr()+"/v1/jobs?index=1000&wait=5m", nil))
		if err == nil {
			_ = resp.Body.Close()
		}
		done <- resp
	}()
	<-fake.md
	<-fake.list
	<-fake.entered
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	if err := s.Shutdown(ctx); err != nil {
		t.Fatalf("shutdown waited for the blocking query: %v", err)
	}
	if resp := <-done; resp != nil && resp.StatusCode == http.StatusOK {
		t.Fatalf("blocking query answered 200 at shutdown")
	}
}

// TestOpenAPIServed checks that the document is served and names the
// API's paths.
func TestOpenAPIServed(t *testing.T) {
	s, _ := startFake(t)
	resp, body := do(t, newRequest(t, "GET", "http://"+s.Addr()+"/v1/openapi.json", nil))
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("status %d", resp.StatusCode)
	}
	var doc struct {
		Paths map[string]any `json:"paths"`
	}
	if err := json.Unmarshal(body, &doc); err != nil {
		t.Fatal(err)
	}
	for _, p := range []string{"/v1/jobs", "/v1/job/{job_id}", "/v1/event/stream", "/v1/acl/token/self"} {
		if _, ok := doc.Paths[p]; !ok {
			t.Errorf("OpenAPI document lacks %s", p)
		}
	}
}
