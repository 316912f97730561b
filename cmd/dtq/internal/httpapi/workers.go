package httpapi

import (
	"net/http"
	"strconv"
	"time"

	"github.com/dtq-io/dtq"
	"github.com/dtq-io/dtq/dtqtype"
)

// Bounds of GET /api/v1/stats?window=.
const (
	defaultStatsWindow = 15 * time.Minute
	minStatsWindow     = time.Minute
	maxStatsWindow     = 2 * time.Hour
)

// listWorkers is GET /api/v1/workers?limit=&cursor=: one page of the
// workers that heartbeated in the last 24 hours, live or stale, in worker id
// order.
func (s *Server) listWorkers(w http.ResponseWriter, r *http.Request) {
	q, err := parseQuery(r, "limit", "cursor")
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	limit, err := parseLimit(q)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	res, err := s.cfg.Inspector.ListWorkers(r.Context(), &dtq.WorkerListParams{Cursor: q.Get("cursor"), Limit: limit})
	if err != nil {
		s.writeError(w, r, queryError(err))
		return
	}
	s.writeJSON(w, r, http.StatusOK, res)
}

// getWorker is GET /api/v1/workers/{id}.
func (s *Server) getWorker(w http.ResponseWriter, r *http.Request) {
	if _, err := parseQuery(r); err != nil {
		s.writeError(w, r, err)
		return
	}
	wi, err := s.cfg.Inspector.GetWorker(r.Context(), r.PathValue("id"))
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	s.writeJSON(w, r, http.StatusOK, wi)
}

// stats is GET /api/v1/stats?queue=&window=: per-minute counters, oldest
// minute first, for one queue or (no queue) all queues summed.
func (s *Server) stats(w http.ResponseWriter, r *http.Request) {
	q, err := parseQuery(r, "queue", "window")
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	window, err := parseWindow(q.Get("window"))
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	items, err := s.cfg.Inspector.Stats(r.Context(), q.Get("queue"), window)
	if err != nil {
		s.writeError(w, r, queryError(err))
		return
	}
	if items == nil {
		items = []*dtqtype.MinuteStats{}
	}
	s.writeJSON(w, r, http.StatusOK, map[string]any{"items": items})
}

// parseWindow reads ?window=: a Go duration ("15m", "1h") or a bare number
// of minutes ("15"); whole minutes from 1m to 2h; "" = 15m.
func parseWindow(v string) (time.Duration, error) {
	if v == "" {
		return defaultStatsWindow, nil
	}
	d, err := time.ParseDuration(v)
	if err != nil {
		n, nerr := strconv.Atoi(v)
		if nerr != nil || n < 0 || n > int(maxStatsWindow/time.Minute) {
			d = -1
		} else {
			d = time.Duration(n) * time.Minute
		}
	}
	if d < minStatsWindow || d > maxStatsWindow || d%time.Minute != 0 {
		return 0, badRequest("window", "window: must be whole minutes between 1m and 2h, as a duration (15m, 1h) or a number of minutes (15)")
	}
	return d, nil
}
