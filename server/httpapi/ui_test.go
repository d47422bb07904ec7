package httpapi

import (
	"net/http"
	"strings"
	"testing"
)

// TestUIServed checks the web UI is routed: /ui/ and a view's address
// answer the page, / and /ui redirect to /ui/, and the API beside it still
// answers JSON.
func TestUIServed(t *testing.T) {
	s, _ := startFake(t)
	base := "http://" + s.Addr()
	for _, path := range []string{"/ui/", "/ui/jobs/web"} {
		resp, body := do(t, newRequest(t, "GET", base+path, nil))
		if resp.StatusCode != http.StatusOK || !strings.Contains(string(body), "<title>drover</title>") {
			t.Errorf("GET %s: %d %.80q", path, resp.StatusCode, body)
		}
	}
	noFollow := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	for _, path := range []string{"/", "/ui"} {
		resp, err := noFollow.Do(newRequest(t, "GET", base+path, nil))
		if err != nil {
			t.Fatal(err)
		}
		_ = resp.Body.Close()
		if loc := resp.Header.Get("Location"); resp.StatusCode/100 != 3 || loc != "/ui/" {
			t.Errorf("GET %s: %d to %q, want a redirect to /ui/", path, resp.StatusCode, loc)
		}
	}
	resp, _ := do(t, newRequest(t, "GET", base+"/nope", nil))
	if resp.StatusCode != http.StatusNotFound {
		t.Errorf("GET /nope: %d, want 404", resp.StatusCode)
	}
	resp, _ = do(t, newRequest(t, "GET", base+"/v1/openapi.json", nil))
	if ct := resp.Header.Get("Content-Type"); resp.StatusCode != http.StatusOK || ct != "application/json" {
		t.Errorf("GET /v1/openapi.json beside the UI: %d %s", resp.StatusCode, ct)
	}
}
