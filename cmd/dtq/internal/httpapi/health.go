package httpapi

import (
	"context"
	_ "embed"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"time"

	"github.com/dtq-io/dtq"
	"github.com/dtq-io/dtq/dtqtype"
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

// readyMessages say what a failed readiness check means, in words that
// name no address and quote no driver error: /ready is unauthenticated.
var readyMessages = map[string]string{
	dtq.CheckRedisReachable:  "not ready: Redis does not answer",
	dtq.CheckScripts:         "not ready: dtq's scripts could not be loaded into Redis",
	dtq.CheckMaxmemoryPolicy: "not ready: Redis must run with maxmemory-policy noeviction (an evicted task is lost silently)",
	dtq.CheckRedisVersion:    "not ready: dtq needs Redis 7.0 or later",
	dtq.CheckRegistered:      "not ready: the worker has not registered with Redis yet",
	dtq.CheckDraining:        "not ready: the worker is draining and takes no more tasks",
}

// ReadinessMessage names the check a failed readiness check err (from
// Inspector.Ready or Worker.Ready) failed and says what it means, in words
// safe to show an unauthenticated caller: no address, no driver error. An
// error that is not a *dtq.ReadinessError counts as CheckRedis.
func ReadinessMessage(err error) (check, message string) {
	check = dtq.CheckRedisReachable
	var re *dtq.ReadinessError
	if errors.As(err, &re) {
		check = re.Check
	}
	msg, ok := readyMessages[check]
	if !ok {
		msg = "not ready: the " + check + " check failed"
	}
	if re != nil && re.Detail != "" {
		msg += " (" + re.Detail + ")"
	}
	return check, msg
}

// ready is GET /ready: Redis answers, the scripts are loaded and
// maxmemory-policy is noeviction. A failure names the check in
// details.check; the cause goes to the log only.
func (s *Server) ready(w http.ResponseWriter, r *http.Request) {
	ctx, cancel := context.WithTimeout(r.Context(), readyTimeout)
	defer cancel()
	unknown, err := s.cfg.Inspector.ReadyChecks(ctx)
	if err != nil {
		s.log.WarnContext(r.Context(), "not ready", "request_id", RequestIDFromContext(r.Context()), "err", clean(err.Error()))
		check, msg := ReadinessMessage(err)
		s.writeAPIError(w, r, &apiError{status: http.StatusServiceUnavailable, code: codeRedisUnavailable,
			message: msg, details: map[string]any{"check": check}})
		return
	}
	// Memory is reported, never failed on: a full Redis refuses writes but
	// still serves reads and finalizes, and restarting the API would not help.
	// So are replica acknowledgements that cannot protect a write (no
	// append-only file, too few replicas): the API still serves.
	body := map[string]any{"status": "ready"}
	if len(unknown) > 0 {
		body["unknown"] = unknown
	}
	var warn []string
	if m, err := s.cfg.Inspector.RedisMemory(ctx); err == nil {
		warn = append(warn, memoryWarnings(m)...)
	}
	warn = append(warn, s.cfg.Client.DurabilityWarnings(ctx)...)
	if len(warn) > 0 {
		body["warnings"] = warn
	}
	s.writeJSON(w, r, http.StatusOK, body)
}

// openAPI is GET /api/v1/openapi.json.
func (s *Server) openAPI(w http.ResponseWriter, _ *http.Request) {
	h := w.Header()
	h.Set("Content-Type", "application/json")
	h.Set("Content-Length", strconv.Itoa(len(openapiJSON)))
	h.Set("Cache-Control", "no-cache")
	w.WriteHeader(http.StatusOK)
	_, _ = w.Write(openapiJSON)
}

// memoryWarnAt is the share of maxmemory past which Redis's memory use is
// reported (by /ready, without failing it).
const memoryWarnAt = 0.8

// memoryWarnings says what a deployment should know about Redis's memory:
// no maxmemory set (Redis grows until the host runs out), or use past
// memoryWarnAt of it (at 100 % every write is refused). None for nil.
func memoryWarnings(m *dtqtype.RedisMemory) []string {
	switch {
	case m == nil:
		return nil
	case m.MaxBytes == 0:
		return []string{"Redis has no maxmemory set: it grows until the host runs out of memory; " +
			"set maxmemory (with maxmemory-policy noeviction) and size it as docs/operations.md (\"Sizing Redis\") shows"}
	case float64(m.UsedBytes) > memoryWarnAt*float64(m.MaxBytes):
		return []string{fmt.Sprintf("Redis uses %.0f%% of maxmemory (%d of %d bytes); at 100%% every submission is refused "+
			"with 503: raise maxmemory or shorten DTQ_SUCCEEDED_RETENTION / DTQ_FAILED_RETENTION",
			100*float64(m.UsedBytes)/float64(m.MaxBytes), m.UsedBytes, m.MaxBytes)}
	}
	return nil
}
