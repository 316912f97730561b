// Package httpapi serves dtq's HTTP API under /api/v1, plus /health and
// /ready. It goes through the public library (dtq.Client, dtq.Inspector)
// and never around it into storage.
package httpapi

import (
	"log/slog"
	"net/http"

	"github.com/dtq-io/dtq"
)

// Role is an API key's role; each includes the ones before it.
type Role int

// Roles, weakest first.
const (
	RoleReader Role = iota + 1
	RoleProducer
	RoleAdmin
)

// APIKey is one configured key (DTQ_API_KEYS entry role:name:secret).
type APIKey struct {
	Role   Role
	Name   string
	Secret string
}

// Config configures the HTTP API.
type Config struct {
	Client          *dtq.Client
	Inspector       *dtq.Inspector
	Keys            []APIKey // empty = open mode (no auth)
	MaxPayloadBytes int      // DTQ_MAX_PAYLOAD_BYTES; bounds the body size
	Logger          *slog.Logger
}

// Server is the HTTP API handler.
type Server struct {
	cfg Config
	mux *http.ServeMux
}

// New returns the API handler.
func New(cfg Config) (*Server, error) {
	return &Server{cfg: cfg, mux: http.NewServeMux()}, nil
}

// ServeHTTP implements http.Handler.
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) { s.mux.ServeHTTP(w, r) }
