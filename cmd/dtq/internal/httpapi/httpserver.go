package httpapi

import (
	"net/http"
	"time"
)

// Limits of the HTTP server in front of the API (docs/security.md). There is
// no WriteTimeout: long-polls (?wait=) and the event feed legitimately hold
// a response open; each event write has its own deadline instead.
const (
	DefaultReadHeaderTimeout = 10 * time.Second
	DefaultReadTimeout       = time.Minute
	DefaultIdleTimeout       = 2 * time.Minute
	DefaultMaxHeaderBytes    = 1 << 20
)

// ServerLimits are the connection limits of NewHTTPServer. Zero fields take
// the defaults above; tests shorten them.
type ServerLimits struct {
	// ReadHeaderTimeout cuts off a client that trickles its headers
	// (slowloris). Default 10 s.
	ReadHeaderTimeout time.Duration
	// ReadTimeout bounds reading the whole request, body included.
	// Default 1 min.
	ReadTimeout time.Duration
	// IdleTimeout closes idle keep-alive connections. Default 2 min.
	IdleTimeout time.Duration
	// MaxHeaderBytes bounds the request line and headers; beyond it Go's
	// server answers 431. Default 1 MiB.
	MaxHeaderBytes int
}

// NewHTTPServer returns the http.Server that serves h (the API, usually
// with the dashboard) with limits l. The caller sets Addr, BaseContext and
// ErrorLog as it needs.
func NewHTTPServer(h http.Handler, l ServerLimits) *http.Server {
	or := func(d, def time.Duration) time.Duration {
		if d > 0 {
			return d
		}
		return def
	}
	maxHeader := l.MaxHeaderBytes
	if maxHeader <= 0 {
		maxHeader = DefaultMaxHeaderBytes
	}
	return &http.Server{
		Handler:           h,
		ReadHeaderTimeout: or(l.ReadHeaderTimeout, DefaultReadHeaderTimeout),
		ReadTimeout:       or(l.ReadTimeout, DefaultReadTimeout),
		IdleTimeout:       or(l.IdleTimeout, DefaultIdleTimeout),
		MaxHeaderBytes:    maxHeader,
	}
}
