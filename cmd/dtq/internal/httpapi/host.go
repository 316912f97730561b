package httpapi

import (
	"net"
	"net/http"
	"strings"
)

// Host check (docs/security.md). A page on a name the attacker controls can make
// that name resolve to 127.0.0.1 (DNS rebinding); the browser then treats
// the API as same-origin and sends the attacker's Host. In open mode no key
// stands in the way, so only a loopback Host, "localhost" or a name the
// operator listed (DTQ_ALLOWED_HOSTS) is served.

// normalHost lower-cases a host and drops its port, its IPv6 brackets and
// a trailing dot.
func normalHost(h string) string {
	if host, _, err := net.SplitHostPort(h); err == nil {
		h = host
	}
	h = strings.TrimSuffix(strings.Trim(h, "[]"), ".")
	return strings.ToLower(h)
}

// hostAllowed reports whether an open-mode API may answer a request whose
// Host header is host.
func (s *Server) hostAllowed(host string) bool {
	h := normalHost(host)
	if h == "" {
		return false
	}
	if h == "localhost" {
		return true
	}
	if ip := net.ParseIP(h); ip != nil && ip.IsLoopback() {
		return true
	}
	_, ok := s.allowedHosts[h]
	_, all := s.allowedHosts["*"]
	return ok || all
}

// checkHost refuses, in open mode, a request whose Host is not allowed.
// /health and /ready are answered anyway: probes address a container by
// its IP, and neither says anything an attacker could use.
func (s *Server) checkHost(w http.ResponseWriter, r *http.Request) bool {
	if !s.OpenMode() || r.URL.Path == "/health" || r.URL.Path == "/ready" || s.hostAllowed(r.Host) {
		return true
	}
	s.writeAPIError(w, r, &apiError{status: http.StatusMisdirectedRequest, code: codeForbidden,
		message: "this API runs without keys (open mode) and answers only requests addressed to localhost or a loopback address; " +
			"add the host to DTQ_ALLOWED_HOSTS, or configure DTQ_API_KEYS",
		details: map[string]any{"host": clean(normalHost(r.Host))}})
	return false
}
