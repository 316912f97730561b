package httpapi

import (
	"context"
	_ "embed"
	"net/http"
	"strconv"
	"time"
)

// openapiJSON is the OpenAPI 3.1 description of every route, kept in the
// repository next to the code it describes.
//
//go:embed openapi.json
var openapiJSON []byte

// readyTimeout bounds /ready, so a probe gets an answer even when Redis
// hangs.
const readyTimeout = 3 * time.Second

// health is GET /health: the process is up. It touches nothing.
func (s *Server) health(w http.ResponseWriter, r *http.Request) {
	s.writeJSON(w, r, http.StatusOK, map[string]string{"status": "ok"})
}

// ready is GET /ready: Redis answers, the scripts are loaded and
// maxmemory-policy is noeviction.
func (s *Server) ready(w http.ResponseWriter, r *http.Request) {
	ctx, cancel := context.WithTimeout(r.Context(), readyTimeout)
	defer cancel()
	if err := s.cfg.Inspector.Ready(ctx); err != nil {
		s.log.WarnContext(r.Context(), "not ready", "request_id", RequestIDFromContext(r.Context()), "err", clean(err.Error()))
		s.writeAPIError(w, r, &apiError{status: http.StatusServiceUnavailable, code: codeRedisUnavailable,
			message: "not ready: " + err.Error()})
		return
	}
	s.writeJSON(w, r, http.StatusOK, map[string]string{"status": "ready"})
}

// openAPI is GET /api/v1/openapi.json.
func (s *Server) openAPI(w http.ResponseWriter, r *http.Request) {
	h := w.Header()
	h.Set("Content-Type", "application/json")
	h.Set("Content-Length", strconv.Itoa(len(openapiJSON)))
	h.Set("Cache-Control", "no-cache")
	w.WriteHeader(http.StatusOK)
	_, _ = w.Write(openapiJSON)
}
