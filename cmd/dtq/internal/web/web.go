// Package web serves dtq's dashboard: one HTML page and its hand-written
// scripts and styles, embedded in the binary. The dashboard is a client of
// the public HTTP API (/api/v1/...) and of the event feed like any other;
// it has no access of its own to Redis or to the server's state.
//
// Handler serves the page at "/" and its assets under "/static/<version>/",
// where <version> is a digest of every embedded file: the assets can then
// be cached for good, and a new build is picked up on the next page load.
package web

import (
	"bytes"
	"crypto/sha256"
	"embed"
	"encoding/hex"
	"io/fs"
	"net/http"
	"path"
	"slices"
	"strings"
	"sync"
	"time"
)

//go:embed index.html static
var files embed.FS

// contentSecurityPolicy is sent with every response of Handler. Scripts,
// styles, images and connections may come from the dashboard's own origin
// only; nothing inline, no eval, no framing. Trusted Types are required, so
// that no string can reach an HTML sink even by mistake: the scripts build
// the page with DOM calls only.
const contentSecurityPolicy = "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self'; " +
	"connect-src 'self'; manifest-src 'self'; base-uri 'none'; form-action 'self'; frame-ancestors 'none'; " +
	"require-trusted-types-for 'script'; trusted-types 'none'"

// assetsPlaceholder is replaced in index.html by the versioned asset path.
const assetsPlaceholder = "%ASSETS%"

// site is the embedded dashboard, prepared once.
type site struct {
	version string // digest of every embedded file
	index   []byte // index.html with the asset path filled in
	assets  map[string]*asset
}

// asset is one file under static/.
type asset struct {
	body        []byte
	contentType string
	etag        string
}

// load reads and digests the embedded files, once. They are part of the
// binary, so a failure here is a build mistake: it panics.
var load = sync.OnceValue(func() *site {
	s := &site{assets: map[string]*asset{}}
	sum := sha256.New()
	var paths []string
	err := fs.WalkDir(files, ".", func(p string, d fs.DirEntry, err error) error {
		if err == nil && !d.IsDir() {
			paths = append(paths, p)
		}
		return err
	})
	if err != nil {
		panic("web: reading the embedded files: " + err.Error())
	}
	slices.Sort(paths)
	var index []byte
	for _, p := range paths {
		body, err := files.ReadFile(p)
		if err != nil {
			panic("web: reading the embedded files: " + err.Error())
		}
		sum.Write([]byte(p))
		sum.Write([]byte{0})
		sum.Write(body)
		if p == "index.html" {
			index = body
			continue
		}
		fileSum := sha256.Sum256(body)
		s.assets[strings.TrimPrefix(p, "static/")] = &asset{body: body, contentType: contentType(p),
			etag: `"` + hex.EncodeToString(fileSum[:8]) + `"`}
	}
	s.version = hex.EncodeToString(sum.Sum(nil)[:6])
	s.index = bytes.ReplaceAll(index, []byte(assetsPlaceholder), []byte("static/"+s.version))
	return s
})

// contentType is the Content-Type of an embedded file, by extension. It is
// fixed here rather than taken from the system's MIME tables, which differ
// between machines (some map .js to text/plain).
func contentType(p string) string {
	switch path.Ext(p) {
	case ".html":
		return "text/html; charset=utf-8"
	case ".css":
		return "text/css; charset=utf-8"
	case ".js":
		return "text/javascript; charset=utf-8"
	case ".svg":
		return "image/svg+xml"
	case ".png":
		return "image/png"
	case ".json", ".webmanifest":
		return "application/json"
	}
	return "application/octet-stream"
}

// Handler returns the dashboard's handler. Mount it at "/" next to the API:
//
//	mux.Handle("/", web.Handler())
//
// It answers GET and HEAD only: the page at "/" (and "/index.html"), its
// assets under "/static/<version>/", and 404 for anything else. The page is
// revalidated on every load (Cache-Control: no-cache, with an ETag); assets
// under the current version are immutable for a year, while a request for
// another version (a page loaded before an upgrade) gets today's file
// uncached. Every response carries a strict Content-Security-Policy and the usual
// hardening headers. The handler is safe for concurrent use.
func Handler() http.Handler {
	s := load()
	return http.HandlerFunc(s.serveHTTP)
}

func (s *site) serveHTTP(w http.ResponseWriter, r *http.Request) {
	h := w.Header()
	h.Set("Content-Security-Policy", contentSecurityPolicy)
	h.Set("X-Content-Type-Options", "nosniff")
	h.Set("X-Frame-Options", "DENY")
	h.Set("Referrer-Policy", "no-referrer")
	h.Set("Cross-Origin-Opener-Policy", "same-origin")
	h.Set("Cross-Origin-Resource-Policy", "same-origin")

	if r.Method != http.MethodGet && r.Method != http.MethodHead {
		h.Set("Allow", "GET, HEAD")
		http.Error(w, "method not allowed", http.StatusMethodNotAllowed)
		return
	}
	p := r.URL.Path
	switch {
	case p == "/" || p == "/index.html":
		h.Set("Cache-Control", "no-cache")
		serveFile(w, r, "index.html", "text/html; charset=utf-8", `"`+s.version+`"`, s.index)
		return
	case strings.HasPrefix(p, "/static/"):
		version, name, ok := strings.Cut(strings.TrimPrefix(p, "/static/"), "/")
		if a := s.assets[name]; ok && a != nil && version != "" {
			if version == s.version {
				h.Set("Cache-Control", "public, max-age=31536000, immutable")
			} else {
				h.Set("Cache-Control", "no-cache")
			}
			serveFile(w, r, name, a.contentType, a.etag, a.body)
			return
		}
	}
	h.Set("Cache-Control", "no-cache")
	http.NotFound(w, r)
}

// serveFile answers with body, honouring If-None-Match (304), HEAD and
// ranges.
func serveFile(w http.ResponseWriter, r *http.Request, name, ctype, etag string, body []byte) {
	h := w.Header()
	h.Set("Content-Type", ctype)
	h.Set("ETag", etag)
	// A zero modification time makes ServeContent rely on the ETag alone.
	http.ServeContent(w, r, name, time.Time{}, bytes.NewReader(body))
}
