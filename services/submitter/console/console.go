// Package console is ax's web console: a few static files, embedded in the
// binary, that the submitter serves under /ui/. The pages hold no data of
// their own. Their script calls the same JSON API as the CLI, with the API
// key the operator typed in kept in the tab's sessionStorage and sent as
// an Authorization header, so the console needs no session store, no
// cookie and therefore no CSRF token: a page of another site can make the
// browser send neither the header nor the token.
//
// Every answer carries a strict Content-Security-Policy (scripts, styles
// and connections from this origin only, no inline code, Trusted Types,
// no framing), so that even a task payload that looks like HTML cannot
// run as script: the pages also only ever set text, never markup.
package console

import (
	"crypto/sha256"
	"embed"
	"encoding/hex"
	"fmt"
	"io/fs"
	"net/http"
	"path"
	"strings"
)

// Prefix is the path the console is served under.
const Prefix = "/ui/"

// CSP is the Content-Security-Policy of every console answer. Nothing
// inline and nothing from elsewhere runs or loads; require-trusted-types
// makes any markup-from-a-string sink (innerHTML and the like) throw.
const CSP = "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self'; connect-src 'self'; " +
	"base-uri 'none'; form-action 'none'; frame-ancestors 'none'; require-trusted-types-for 'script'"

//go:embed assets
var assets embed.FS

// contentTypes names the type of every kind of file the console ships, so
// that no answer depends on sniffing or on the machine's MIME tables.
var contentTypes = map[string]string{
	".html": "text/html; charset=utf-8",
	".js":   "text/javascript; charset=utf-8",
	".css":  "text/css; charset=utf-8",
	".svg":  "image/svg+xml",
}

// Assets are the console's files, as served below Prefix.
func Assets() fs.FS {
	sub, err := fs.Sub(assets, "assets")
	if err != nil {
		panic(err) // "assets" is a valid path, embedded above
	}
	return sub
}

// file is one embedded asset, read once at start.
type file struct {
	body        []byte
	contentType string
	etag        string
}

// Handler serves the console: index.html at Prefix and the assets below
// it. Pages are addressed by the URL fragment (#/tasks, #/task/ID), so the
// server has one page to serve and nothing to route.
type Handler struct {
	files map[string]file
}

// New reads the embedded assets; it fails only if the build embedded a
// file of a kind contentTypes does not name.
func New() (*Handler, error) {
	h := &Handler{files: map[string]file{}}
	files := Assets()
	err := fs.WalkDir(files, ".", func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		ct, ok := contentTypes[path.Ext(p)]
		if !ok {
			return fmt.Errorf("console asset %s: no content type for %q", p, path.Ext(p))
		}
		body, err := fs.ReadFile(files, p)
		if err != nil {
			return fmt.Errorf("console asset %s: %w", p, err)
		}
		sum := sha256.Sum256(body)
		h.files[p] = file{body: body, contentType: ct, etag: `"` + hex.EncodeToString(sum[:8]) + `"`}
		return nil
	})
	if err != nil {
		return nil, err
	}
	return h, nil
}

// ServeHTTP answers GET and HEAD for Prefix and the files below it.
func (h *Handler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	name := strings.TrimPrefix(r.URL.Path, Prefix)
	if name == "" {
		name = "index.html"
	}
	hdr := w.Header()
	hdr.Set("Content-Security-Policy", CSP)
	hdr.Set("X-Content-Type-Options", "nosniff")
	hdr.Set("Referrer-Policy", "no-referrer")
	hdr.Set("X-Frame-Options", "DENY")
	f, ok := h.files[name]
	if !ok {
		hdr.Set("Content-Type", "text/plain; charset=utf-8")
		w.WriteHeader(http.StatusNotFound)
		_, _ = fmt.Fprintf(w, "no console file %q; the console starts at %s\n", name, Prefix)
		return
	}
	// The assets change only with the binary: the browser asks again each
	// time (no-cache) and gets 304 while the ETag matches.
	hdr.Set("Cache-Control", "no-cache")
	hdr.Set("ETag", f.etag)
	hdr.Set("Content-Type", f.contentType)
	if r.Header.Get("If-None-Match") == f.etag {
		w.WriteHeader(http.StatusNotModified)
		return
	}
	_, _ = w.Write(f.body)
}
