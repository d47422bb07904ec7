package httpapi

import (
	"net/http/httptest"
	"net/url"
	"testing"
)

func TestRewriteQuery(t *testing.T) {
	tests := []struct {
		name, path, query string
		want              url.Values
		wantErr           bool
	}{
		{name: "none", path: "/v1/jobs", query: "", want: url.Values{}},
		{name: "index and wait", path: "/v1/jobs", query: "index=7&wait=30s",
			want: url.Values{"query.min_index": {"7"}, "query.max_wait": {"30s"}}},
		{name: "wait in seconds", path: "/v1/jobs", query: "wait=5",
			want: url.Values{"query.max_wait": {"5s"}}},
		{name: "wait in minutes", path: "/v1/jobs", query: "wait=2m",
			want: url.Values{"query.max_wait": {"120s"}}},
		{name: "stale bare", path: "/v1/jobs", query: "stale",
			want: url.Values{"query.allow_stale": {"true"}}},
		{name: "stale true", path: "/v1/jobs", query: "stale=true",
			want: url.Values{"query.allow_stale": {"true"}}},
		{name: "stale false", path: "/v1/jobs", query: "stale=false", want: url.Values{}},
		{name: "paging", path: "/v1/jobs", query: "prefix=we&per_page=2&next_token=x",
			want: url.Values{"page.prefix": {"we"}, "page.page_size": {"2"}, "page.next_token": {"x"}}},
		{name: "event stream index", path: "/v1/event/stream", query: "index=9&topics=TOPIC_JOB",
			want: url.Values{"from_index": {"9"}, "topics": {"TOPIC_JOB"}}},
		{name: "others kept", path: "/v1/operator/raft/peer", query: "id=s1",
			want: url.Values{"id": {"s1"}}},
		{name: "field paths kept", path: "/v1/jobs", query: "query.min_index=3",
			want: url.Values{"query.min_index": {"3"}}},
		{name: "bad index", path: "/v1/jobs", query: "index=x", wantErr: true},
		{name: "negative index", path: "/v1/jobs", query: "index=-1", wantErr: true},
		{name: "bad wait", path: "/v1/jobs", query: "wait=soon", wantErr: true},
		{name: "negative wait", path: "/v1/jobs", query: "wait=-1s", wantErr: true},
		{name: "bad stale", path: "/v1/jobs", query: "stale=maybe", wantErr: true},
		{name: "bad escape", path: "/v1/jobs", query: "prefix=%zz", wantErr: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			u := &url.URL{Path: tt.path, RawQuery: tt.query}
			err := rewriteQuery(u)
			if tt.wantErr {
				if err == nil {
					t.Fatalf("rewrote %q to %q, want an error", tt.query, u.RawQuery)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			got, err := url.ParseQuery(u.RawQuery)
			if err != nil {
				t.Fatal(err)
			}
			if got.Encode() != tt.want.Encode() {
				t.Fatalf("rewrote %q to %q, want %q", tt.query, got.Encode(), tt.want.Encode())
			}
		})
	}
}

func TestCompact(t *testing.T) {
	for in, want := range map[string]string{
		`{"a": "b c", "d":[1, 2]}`:         `{"a":"b c","d":[1,2]}`,
		"{\n  \"a\" : \"x\\\" y\"\n}":      `{"a":"x\" y"}`,
		`{"a":"back\\", "b": "\\\\ "}`:     `{"a":"back\\","b":"\\\\ "}`,
		`{"t":"tab	and newline\n inside"}`: `{"t":"tab	and newline\n inside"}`,
	} {
		if got := string(compact([]byte(in))); got != want {
			t.Errorf("compact(%q) = %q, want %q", in, got, want)
		}
	}
}

func TestIsLongLived(t *testing.T) {
	for target, want := range map[string]bool{
		"/v1/jobs":                   false,
		"/v1/jobs?stale":             false,
		"/v1/jobs?index=3":           true,
		"/v1/jobs?query.min_index=3": true,
		"/v1/event/stream":           true,
	} {
		r := httptest.NewRequest("GET", target, nil)
		if got := isLongLived(r); got != want {
			t.Errorf("isLongLived(%s) = %v, want %v", target, got, want)
		}
	}
}
