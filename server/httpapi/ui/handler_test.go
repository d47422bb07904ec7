package ui_test

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/droverhq/drover/server/httpapi/ui"
)

func serve(t *testing.T, h http.Handler, method, path string, header http.Header) *httptest.ResponseRecorder {
	t.Helper()
	r := httptest.NewRequest(method, path, nil)
	for k, v := range header {
		r.Header[k] = v
	}
	w := httptest.NewRecorder()
	h.ServeHTTP(w, r)
	return w
}

func TestHandler(t *testing.T) {
	h, err := ui.Handler()
	if err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		path, ctype, contains string
		code                  int
	}{
		{"/ui/", "text/html; charset=utf-8", `src="/ui/js/main.mjs"`, 200},
		{"/ui/index.html", "text/html; charset=utf-8", "<title>drover</title>", 200},
		{"/ui/js/main.mjs", "text/javascript; charset=utf-8", "render(", 200},
		{"/ui/vendor/preact.mjs", "text/javascript; charset=utf-8", "preact@", 200},
		{"/ui/vendor/preact-hooks.mjs", "text/javascript; charset=utf-8", `from"./preact.mjs"`, 200},
		{"/ui/app.css", "text/css; charset=utf-8", ":root", 200},
		// A view's address: the SPA's index, so it can be reloaded.
		{"/ui/jobs/web", "text/html; charset=utf-8", "<title>drover</title>", 200},
		{"/ui/cluster", "text/html; charset=utf-8", "<title>drover</title>", 200},
		// A missing file is a 404, never index.html as JavaScript.
		{"/ui/js/missing.mjs", "", "", 404},
	}
	for _, c := range cases {
		w := serve(t, h, "GET", c.path, nil)
		if w.Code != c.code {
			t.Errorf("GET %s: %d, want %d", c.path, w.Code, c.code)
			continue
		}
		if c.code != 200 {
			continue
		}
		if got := w.Header().Get("Content-Type"); got != c.ctype {
			t.Errorf("GET %s: Content-Type %q, want %q", c.path, got, c.ctype)
		}
		if !strings.Contains(w.Body.String(), c.contains) {
			t.Errorf("GET %s: body does not contain %q", c.path, c.contains)
		}
		for k, want := range map[string]string{"Cache-Control": "no-cache", "X-Content-Type-Options": "nosniff"} {
			if got := w.Header().Get(k); got != want {
				t.Errorf("GET %s: %s %q, want %q", c.path, k, got, want)
			}
		}
		if !strings.Contains(w.Header().Get("Content-Security-Policy"), "script-src 'self'") {
			t.Errorf("GET %s: Content-Security-Policy %q", c.path, w.Header().Get("Content-Security-Policy"))
		}
	}
}

// TestHandlerRevalidates: an unchanged file answers 304 to its ETag, so
// no-cache costs a round trip, not the file.
func TestHandlerRevalidates(t *testing.T) {
	h, err := ui.Handler()
	if err != nil {
		t.Fatal(err)
	}
	first := serve(t, h, "GET", "/ui/vendor/preact.mjs", nil)
	etag := first.Header().Get("ETag")
	if etag == "" {
		t.Fatal("no ETag")
	}
	again := serve(t, h, "GET", "/ui/vendor/preact.mjs", http.Header{"If-None-Match": {etag}})
	if again.Code != http.StatusNotModified || again.Body.Len() != 0 {
		t.Fatalf("If-None-Match %s: %d with %d bytes, want 304 and none", etag, again.Code, again.Body.Len())
	}
	other := serve(t, h, "GET", "/ui/app.css", nil).Header().Get("ETag")
	if other == etag {
		t.Fatalf("two files share ETag %s", etag)
	}
}

func TestHandlerMethods(t *testing.T) {
	h, err := ui.Handler()
	if err != nil {
		t.Fatal(err)
	}
	if w := serve(t, h, "POST", "/ui/", nil); w.Code != http.StatusMethodNotAllowed {
		t.Fatalf("POST /ui/: %d, want 405", w.Code)
	}
	if w := serve(t, h, "HEAD", "/ui/app.css", nil); w.Code != 200 || w.Body.Len() != 0 {
		t.Fatalf("HEAD /ui/app.css: %d with %d bytes", w.Code, w.Body.Len())
	}
}
