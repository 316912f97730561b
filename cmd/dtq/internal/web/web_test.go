package web

import (
	"io/fs"
	"net/http"
	"net/http/httptest"
	"regexp"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

func serve(t *testing.T, method, path string, hdr ...string) *httptest.ResponseRecorder {
	t.Helper()
	req := httptest.NewRequest(method, path, nil)
	for i := 0; i+1 < len(hdr); i += 2 {
		req.Header.Set(hdr[i], hdr[i+1])
	}
	rec := httptest.NewRecorder()
	Handler().ServeHTTP(rec, req)
	return rec
}

func TestHandlerRoutes(t *testing.T) {
	t.Parallel()
	v := load().version
	tests := []struct {
		name, method, path string
		status             int
		ctype, cache       string
	}{
		{"page", http.MethodGet, "/", 200, "text/html; charset=utf-8", "no-cache"},
		{"page by name", http.MethodGet, "/index.html", 200, "text/html; charset=utf-8", "no-cache"},
		{"head", http.MethodHead, "/", 200, "text/html; charset=utf-8", "no-cache"},
		{"stylesheet", http.MethodGet, "/static/" + v + "/app.css", 200, "text/css; charset=utf-8", "public, max-age=31536000, immutable"},
		{"script", http.MethodGet, "/static/" + v + "/js/main.js", 200, "text/javascript; charset=utf-8", "public, max-age=31536000, immutable"},
		{"icon", http.MethodGet, "/static/" + v + "/favicon.svg", 200, "image/svg+xml", "public, max-age=31536000, immutable"},
		{"older version", http.MethodGet, "/static/0123456789ab/app.css", 200, "text/css; charset=utf-8", "no-cache"},
		{"unknown asset", http.MethodGet, "/static/" + v + "/nope.js", 404, "", "no-cache"},
		{"index is not an asset", http.MethodGet, "/static/" + v + "/index.html", 404, "", "no-cache"},
		{"no version", http.MethodGet, "/static/app.css", 404, "", "no-cache"},
		{"unknown path", http.MethodGet, "/favicon.ico", 404, "", "no-cache"},
		{"post", http.MethodPost, "/", 405, "", ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			rec := serve(t, tt.method, tt.path)
			require.Equal(t, tt.status, rec.Code)
			h := rec.Header()
			require.Equal(t, contentSecurityPolicy, h.Get("Content-Security-Policy"))
			require.Equal(t, "nosniff", h.Get("X-Content-Type-Options"))
			require.Equal(t, "DENY", h.Get("X-Frame-Options"))
			if tt.ctype != "" {
				require.Equal(t, tt.ctype, h.Get("Content-Type"))
				require.NotEmpty(t, h.Get("ETag"))
			}
			if tt.cache != "" {
				require.Equal(t, tt.cache, h.Get("Cache-Control"))
			}
			if tt.status == 405 {
				require.Equal(t, "GET, HEAD", h.Get("Allow"))
			}
			if tt.method == http.MethodHead {
				require.Zero(t, rec.Body.Len())
			}
		})
	}
}

func TestHandlerRevalidates(t *testing.T) {
	t.Parallel()
	for _, path := range []string{"/", "/static/" + load().version + "/app.css"} {
		first := serve(t, http.MethodGet, path)
		require.Equal(t, 200, first.Code)
		again := serve(t, http.MethodGet, path, "If-None-Match", first.Header().Get("ETag"))
		require.Equal(t, http.StatusNotModified, again.Code, path)
		require.Zero(t, again.Body.Len())
	}
}

// TestPageReferencesExist checks that every asset the page names, and every
// module a script imports, is embedded: a typo would otherwise only show in
// a browser.
func TestPageReferencesExist(t *testing.T) {
	t.Parallel()
	s := load()
	page := string(s.index)
	require.NotContains(t, page, assetsPlaceholder)
	refs := regexp.MustCompile(`(?:href|src)="static/([0-9a-f]+)/([^"]+)"`).FindAllStringSubmatch(page, -1)
	require.NotEmpty(t, refs)
	for _, m := range refs {
		require.Equal(t, s.version, m[1])
		require.Contains(t, s.assets, m[2], "index.html names a missing asset")
	}

	imports := regexp.MustCompile(`(?m)^\s*(?:import|export)\s[^;]*?from\s+'([^']+)'`)
	err := fs.WalkDir(files, "static", func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() || !strings.HasSuffix(p, ".js") {
			return err
		}
		body, err := files.ReadFile(p)
		require.NoError(t, err)
		dir := strings.TrimPrefix(p[:strings.LastIndex(p, "/")], "static")
		for _, m := range imports.FindAllStringSubmatch(string(body), -1) {
			target := resolve(dir, m[1])
			require.Contains(t, s.assets, target, "%s imports %s, which is not embedded", p, m[1])
		}
		return nil
	})
	require.NoError(t, err)
}

// resolve joins a relative module specifier to the directory of the module
// that imports it; the result is relative to static/.
func resolve(dir, spec string) string {
	parts := strings.Split(strings.Trim(dir, "/"), "/")
	if parts[0] == "" {
		parts = nil
	}
	for _, seg := range strings.Split(spec, "/") {
		switch seg {
		case ".":
		case "..":
			parts = parts[:len(parts)-1]
		default:
			parts = append(parts, seg)
		}
	}
	return strings.Join(parts, "/")
}

// TestNoHTMLSinks guards the rule that the scripts build the page with DOM
// calls only: the Content-Security-Policy requires Trusted Types, so an
// HTML sink would throw in the browser anyway.
func TestNoHTMLSinks(t *testing.T) {
	t.Parallel()
	sinks := regexp.MustCompile(`\.(innerHTML|outerHTML)\s*=|insertAdjacentHTML|document\.write|\beval\(|new Function\(`)
	for name, a := range load().assets {
		if strings.HasSuffix(name, ".js") {
			require.Nil(t, sinks.FindIndex(a.body), "%s uses an HTML or code sink", name)
		}
	}
}
