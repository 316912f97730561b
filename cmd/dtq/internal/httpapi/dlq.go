package httpapi

import (
	"context"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/dtq-io/dtq"
	"github.com/dtq-io/dtq/dtqtype"
)

// listDLQ is GET /api/v1/dlq?queue=&type=&error_class=&limit=&cursor=:
// dead-letter entries newest first, with payload and last error.
func (s *Server) listDLQ(w http.ResponseWriter, r *http.Request) {
	serveList(s, w, r, s.cfg.Inspector.ListDLQ, func(q url.Values, limit int) *dtq.DLQListParams {
		return &dtq.DLQListParams{Queue: q.Get("queue"), Type: q.Get("type"), ErrorClass: q.Get("error_class"),
			Limit: limit, Cursor: q.Get("cursor")}
	}, "queue", "type", "error_class")
}

// getDLQEntry is GET /api/v1/dlq/{task_id}.
func (s *Server) getDLQEntry(w http.ResponseWriter, r *http.Request) {
	serveLookup(s, w, r, s.cfg.Inspector.GetDLQEntry, "task_id")
}

// requeueDLQ is POST /api/v1/dlq/{task_id}/requeue: the task is queued
// again at attempt 1, without a deadline unless the optional body gives one
// ({"ttl_seconds": n} or {"expires_at": t}), and its idempotency record is
// in progress again.
func (s *Server) requeueDLQ(w http.ResponseWriter, r *http.Request) {
	if _, err := parseQuery(r); err != nil {
		s.writeError(w, r, err)
		return
	}
	var body struct {
		TTLSeconds *int64  `json:"ttl_seconds"`
		ExpiresAt  *string `json:"expires_at"`
	}
	if _, err := decodeActionBody(w, r, &body, `{"ttl_seconds": 3600}`); err != nil {
		s.writeError(w, r, err)
		return
	}
	var opt dtq.RequeueOptions
	if body.TTLSeconds != nil {
		if *body.TTLSeconds <= 0 || *body.TTLSeconds > maxRequeueTTL {
			s.writeError(w, r, badRequest("ttl_seconds", "must be a whole number of seconds from 1 to %d", maxRequeueTTL))
			return
		}
		opt.TTL = time.Duration(*body.TTLSeconds) * time.Second
	}
	if body.ExpiresAt != nil {
		t, err := time.Parse(time.RFC3339Nano, *body.ExpiresAt)
		if err != nil {
			s.writeError(w, r, badRequest("expires_at", "must be an RFC 3339 time like 2026-01-02T15:04:05.000Z"))
			return
		}
		opt.ExpiresAt = t
	}
	id := r.PathValue("task_id")
	ctx, cancel := actionContext(r.Context())
	defer cancel()
	t, err := s.cfg.Admin.RequeueDLQ(ctx, id, opt)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	s.audited(r, "dlq.requeue", id, "")
	s.writeJSON(w, r, http.StatusOK, taskBody{Task: t})
}

// maxRequeueTTL bounds a requeue's ttl_seconds, as delays are bounded: 365 days.
const maxRequeueTTL = 365 * 24 * 3600

// discardDLQ is POST /api/v1/dlq/{task_id}/discard: the entry is removed;
// the task stays dead_lettered, marked discarded, and its retention starts.
func (s *Server) discardDLQ(w http.ResponseWriter, r *http.Request) {
	s.dlqOne(w, r, "dlq.discard", s.cfg.Admin.DiscardDLQ)
}

func (s *Server) dlqOne(w http.ResponseWriter, r *http.Request, action string,
	act func(ctx context.Context, id string) (*dtqtype.TaskInfo, error)) {
	if err := actionInput(w, r); err != nil {
		s.writeError(w, r, err)
		return
	}
	id := r.PathValue("task_id")
	ctx, cancel := actionContext(r.Context())
	defer cancel()
	t, err := act(ctx, id)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	s.audited(r, action, id, "")
	s.writeJSON(w, r, http.StatusOK, taskBody{Task: t})
}

// filterSummary names a bulk action's filter for the audit log, e.g.
// "queue=emails type=send_receipt", or "all" when it selects everything.
func filterSummary(f *dtq.DLQFilter) string {
	var parts []string
	for _, kv := range [][2]string{{"queue", f.Queue}, {"type", f.Type}, {"error_class", f.ErrorClass}} {
		if kv[1] != "" {
			parts = append(parts, kv[0]+"="+kv[1])
		}
	}
	if len(parts) == 0 {
		return "all"
	}
	return strings.Join(parts, " ")
}

// requeueDLQBulk is POST /api/v1/dlq/requeue.
func (s *Server) requeueDLQBulk(w http.ResponseWriter, r *http.Request) {
	s.dlqBulk(w, r, "dlq.requeue_bulk", s.cfg.Admin.RequeueDLQMatching)
}

// purgeDLQBulk is POST /api/v1/dlq/purge.
func (s *Server) purgeDLQBulk(w http.ResponseWriter, r *http.Request) {
	s.dlqBulk(w, r, "dlq.purge_bulk", s.cfg.Admin.PurgeDLQMatching)
}

// dlqBulk applies act to the dead-letter entries matching the filter given
// in the query string or in a JSON body (not both), and answers {matched,
// processed, next_cursor}. A non-null next_cursor means there is more: call
// again with it.
func (s *Server) dlqBulk(w http.ResponseWriter, r *http.Request, action string,
	act func(ctx context.Context, f dtq.DLQFilter) (*dtqtype.BulkResult, error)) {
	q, err := parseQuery(r, "queue", "type", "error_class", "cursor")
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	f := dtq.DLQFilter{Queue: q.Get("queue"), Type: q.Get("type"), ErrorClass: q.Get("error_class"), Cursor: q.Get("cursor")}
	var body dtq.DLQFilter
	hasBody, err := decodeActionBody(w, r, &body, `{"queue": "emails", "type": "send_receipt", "error_class": "Timeout"}`)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	if hasBody {
		if len(q) > 0 {
			s.writeError(w, r, badRequest("", "give the filter in the query string or in the body, not both"))
			return
		}
		f = body
	}
	if k, ok := KeyFromContext(r.Context()); ok && k.Scoped() && f.Queue == "" && len(k.Queues) == 1 {
		f.Queue = k.Queues[0]
	}
	if f.Queue == "" {
		if k, ok := KeyFromContext(r.Context()); ok && k.Scoped() {
			s.writeError(w, r, &scopeError{key: k.Name, queues: k.Queues})
			return
		}
	}
	if err := requireScope(r, f.Queue); err != nil {
		s.writeError(w, r, err)
		return
	}
	ctx, cancel := actionContext(r.Context())
	defer cancel()
	res, err := act(ctx, f)
	if res != nil && (err == nil || res.Processed > 0) {
		s.audited(r, action, filterSummary(&f), partial(err, "matched %d, processed %d", res.Matched, res.Processed))
	}
	if err != nil {
		s.writeError(w, r, queryError(err))
		return
	}
	s.writeJSON(w, r, http.StatusOK, res)
}
