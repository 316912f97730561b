package httpapi

import (
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/dtq-io/dtq"
	"github.com/dtq-io/dtq/dtqtype"
)

// The autoscaling signal (docs/autoscaling.md): one queue's at
// /api/v1/queues/{queue}/scaling, several queues' at
// /api/v1/scaling?queue=a,b (the comma list the event feed takes; a path
// under /api/v1/queues/ would hide a queue named "scaling").

// queueScaling is GET /api/v1/queues/{queue}/scaling?drain=&idle=&concurrency=.
func (s *Server) queueScaling(w http.ResponseWriter, r *http.Request) {
	q, err := parseQuery(r, "drain", "idle", "concurrency")
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	name, err := queueParam(r)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	opt, err := scalingOptions(q)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	res, err := s.cfg.Inspector.Scaling(r.Context(), []string{name}, opt)
	if err != nil {
		s.writeError(w, r, queryError(err))
		return
	}
	s.writeJSON(w, r, http.StatusOK, res[0])
}

// scalingPage is the answer of GET /api/v1/scaling: one signal per queue,
// in the order asked.
type scalingPage struct {
	Items []*dtqtype.QueueScaling `json:"items"`
}

// scaling is GET /api/v1/scaling?queue=a,b&drain=&idle=&concurrency=. A
// key scoped to some queues may leave queue out for all of its queues.
func (s *Server) scaling(w http.ResponseWriter, r *http.Request) {
	q, err := parseQuery(r, "queue", "drain", "idle", "concurrency")
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	var names []string
	for v := range strings.SplitSeq(q.Get("queue"), ",") {
		if v = strings.TrimSpace(v); v != "" {
			names = append(names, v)
		}
	}
	if len(names) == 0 || len(names) > dtq.MaxScalingQueues {
		s.writeError(w, r, badRequest("queue", "queue: name 1 to %d queues, comma-separated (?queue=emails,reports)", dtq.MaxScalingQueues))
		return
	}
	opt, err := scalingOptions(q)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	res, err := s.cfg.Inspector.Scaling(r.Context(), names, opt)
	if err != nil {
		s.writeError(w, r, queryError(err))
		return
	}
	s.writeJSON(w, r, http.StatusOK, scalingPage{Items: res})
}

// scalingOptions reads ?drain= and ?idle= (Go durations, whole seconds:
// drain 1s..24h, default 60s; idle 0s..1h, default 300s) and
// ?concurrency= (1..10000, default 16: the slots a worker is taken to
// have when no live worker of the queue says).
func scalingOptions(q url.Values) (*dtq.ScalingOptions, error) {
	opt := &dtq.ScalingOptions{}
	if v := q.Get("drain"); v != "" {
		d, err := time.ParseDuration(v)
		if err != nil || d < time.Second || d > dtq.MaxScalingDrain || d%time.Second != 0 {
			return nil, badRequest("drain", "drain: must be whole seconds between 1s and 24h, as a duration (60s, 5m)")
		}
		opt.Drain = d
	}
	if v := q.Get("idle"); v != "" {
		d, err := time.ParseDuration(v)
		if err != nil || d < 0 || d > dtq.MaxScalingIdle || d%time.Second != 0 {
			return nil, badRequest("idle", "idle: must be whole seconds between 0s and 1h, as a duration (300s, 10m)")
		}
		opt.Idle = d
		if d == 0 {
			opt.Idle = dtq.NoScalingIdle
		}
	}
	if v := q.Get("concurrency"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 || n > dtq.MaxScalingConcurrency {
			return nil, badRequest("concurrency", "concurrency: must be a whole number between 1 and %d", dtq.MaxScalingConcurrency)
		}
		opt.Concurrency = n
	}
	return opt, nil
}
