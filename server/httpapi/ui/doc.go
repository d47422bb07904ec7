// Package ui is drover's web UI: its static assets, embedded in the binary
// with go:embed, and the handler that serves them under /ui/.
//
// The UI is plain ES modules with no build step (docs/ui.md): the browser
// loads the files as they are in assets/, and the only third-party code is
// Preact and htm, vendored by `make ui-vendor` into assets/vendor/. The UI
// reads and writes only through the HTTP/JSON API under /v1/, with the
// operator's token, so it can do nothing the API would not let that token
// do. The package imports nothing of drover's (docs/architecture.md, "Packages").
package ui
