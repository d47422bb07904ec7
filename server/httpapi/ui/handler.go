package ui

import (
	"bytes"
	"crypto/sha256"
	"embed"
	"encoding/hex"
	"fmt"
	"io/fs"
	"net/http"
	"path"
	"strings"
	"time"
)

// Prefix is the path the UI is served under.
const Prefix = "/ui/"

//go:embed assets
var assets embed.FS

// contentType names the types of the files the UI has, rather than
// relying on the host's MIME tables: a module script served as anything but
// JavaScript is refused by the browser.
func contentType(ext string) (string, bool) {
	switch ext {
	case ".html":
		return "text/html; charset=utf-8", true
	case ".js", ".mjs":
		return "text/javascript; charset=utf-8", true
	case ".css":
		return "text/css; charset=utf-8", true
	case ".svg":
		return "image/svg+xml", true
	case ".png":
		return "image/png", true
	}
	return "", false
}

// csp lets the page load only its own files and talk only to its own
// server: no inline script, no third-party origin, no framing.
const csp = "default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self' data:; " +
	"connect-src 'self'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'"

// asset is one embedded file, ready to serve.
type asset struct {
	body        []byte
	contentType string
	etag        string
}

// handler serves the embedded assets.
type handler struct {
	files map[string]asset
	index asset
}

// Handler serves the UI under Prefix: the file named by the rest of the
// path, and index.html for any other path without a file extension, so
// that a view's address (/ui/jobs/web) can be reloaded or shared. File
// names carry no content hash, so every answer is revalidated (no-cache)
// against an ETag of the content: a server upgraded in place never serves
// a browser stale modules, and an unchanged file costs a 304.
func Handler() (http.Handler, error) {
	h := &handler{files: map[string]asset{}}
	err := fs.WalkDir(assets, "assets", func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		body, err := assets.ReadFile(p)
		if err != nil {
			return fmt.Errorf("read embedded %s: %w", p, err)
		}
		ct, ok := contentType(path.Ext(p))
		if !ok {
			return fmt.Errorf("embedded %s: no content type for %q", p, path.Ext(p))
		}
		sum := sha256.Sum256(body)
		h.files[strings.TrimPrefix(p, "assets/")] = asset{body: body, contentType: ct, etag: `"` + hex.EncodeToString(sum[:12]) + `"`}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("load UI assets: %w", err)
	}
	index, ok := h.files["index.html"]
	if !ok {
		return nil, fmt.Errorf("load UI assets: no index.html")
	}
	h.index = index
	return h, nil
}

func (h *handler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodGet && r.Method != http.MethodHead {
		w.Header().Set("Allow", "GET, HEAD")
		http.Error(w, "method not allowed", http.StatusMethodNotAllowed)
		return
	}
	name := strings.TrimPrefix(r.URL.Path, Prefix)
	a, ok := h.files[name]
	switch {
	case ok:
	case path.Ext(name) == "":
		// A view's address: the app reads the path and shows the view.
		a = h.index
	default:
		// A missing module or style sheet is a 404, not the index page
		// served as JavaScript, so the console names the missing file.
		http.NotFound(w, r)
		return
	}
	hd := w.Header()
	hd.Set("Content-Type", a.contentType)
	hd.Set("Cache-Control", "no-cache")
	hd.Set("ETag", a.etag)
	hd.Set("X-Content-Type-Options", "nosniff")
	hd.Set("Content-Security-Policy", csp)
	hd.Set("Referrer-Policy", "no-referrer")
	// ServeContent answers If-None-Match with 304 and handles HEAD and
	// ranges; no modification time, the ETag is the validator.
	http.ServeContent(w, r, name, time.Time{}, bytes.NewReader(a.body))
}
