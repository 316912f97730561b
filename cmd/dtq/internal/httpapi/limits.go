package httpapi

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"slices"
	"strconv"
	"time"

	"github.com/dtq-io/dtq"
	"github.com/dtq-io/dtq/dtqtype"
)

// limitsBody is the answer of the limits routes.
type limitsBody struct {
	Queue  string               `json:"queue"`
	Limits *dtqtype.QueueLimits `json:"limits"`
}

// getLimits is GET /api/v1/queues/{queue}/limits: the queue's limits,
// {"limits": null} when none are set.
func (s *Server) getLimits(w http.ResponseWriter, r *http.Request) {
	if _, err := parseQuery(r); err != nil {
		s.writeError(w, r, err)
		return
	}
	q, err := queueParam(r)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	l, err := s.cfg.Inspector.GetLimits(r.Context(), q)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	s.writeJSON(w, r, http.StatusOK, limitsBody{Queue: q, Limits: l})
}

// putLimits is PUT /api/v1/queues/{queue}/limits: replaces the queue's
// limits with the body's, e.g. {"rate": {"limit": 10, "period": "1s"},
// "concurrency": 5, "key_concurrency": 1, "fairness": {"weights": {"acme":
// 5}}, "key_rate": {"limit": 2, "period": "1s"}, "key_order": "fifo",
// "events": "outcomes"}. Audited.
func (s *Server) putLimits(w http.ResponseWriter, r *http.Request) {
	if _, err := parseQuery(r); err != nil {
		s.writeError(w, r, err)
		return
	}
	q, err := queueParam(r)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	var l dtqtype.QueueLimits
	var raw bytes.Buffer // the body as read, for zeroLimit
	r.Body = struct {
		io.Reader
		io.Closer
	}{io.TeeReader(r.Body, &raw), r.Body}
	got, err := decodeActionBody(w, r, &l, `{"rate": {"limit": 10, "period": "1s"}, "concurrency": 5}`)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	if !got {
		s.writeError(w, r, badRequest("", `the body must give the limits, like {"rate": {"limit": 10, "period": "1s"}}; DELETE removes them`))
		return
	}
	if field := zeroLimit(raw.Bytes()); field != "" {
		s.writeError(w, r, &dtq.ValidationError{Field: field, Message: "must be at least 1; leave it out for no such limit (or its default)"})
		return
	}
	ctx, cancel := actionContext(r.Context())
	defer cancel()
	if err := s.cfg.Admin.SetLimits(ctx, q, l); err != nil {
		s.writeError(w, r, err)
		return
	}
	s.audited(r, "queue.limits.set", q, limitsSummary(&l))
	s.writeJSON(w, r, http.StatusOK, limitsBody{Queue: q, Limits: &l})
}

// zeroLimit names the first limit body sets to 0, "" when none does. The
// library reads 0 as "not set", so a 0 sent over HTTP would be stored as
// no limit and read back absent; every such value is 1 or more
// (docs/flow-control.md), so 0 is refused instead.
func zeroLimit(body []byte) string {
	type rate struct {
		Burst *int `json:"burst"`
	}
	var v struct {
		Rate           *rate `json:"rate"`
		Concurrency    *int  `json:"concurrency"`
		KeyConcurrency *int  `json:"key_concurrency"`
		Fairness       *struct {
			DefaultWeight *int `json:"default_weight"`
		} `json:"fairness"`
		KeyRate *rate `json:"key_rate"`
	}
	if json.Unmarshal(body, &v) != nil {
		return "" // decodeActionBody read it: cannot happen
	}
	zero := func(n *int) bool { return n != nil && *n == 0 }
	switch {
	case v.Rate != nil && zero(v.Rate.Burst):
		return "rate.burst"
	case zero(v.Concurrency):
		return "concurrency"
	case zero(v.KeyConcurrency):
		return "key_concurrency"
	case v.Fairness != nil && zero(v.Fairness.DefaultWeight):
		return "fairness.default_weight"
	case v.KeyRate != nil && zero(v.KeyRate.Burst):
		return "key_rate.burst"
	}
	return ""
}

// deleteLimits is DELETE /api/v1/queues/{queue}/limits. Audited.
func (s *Server) deleteLimits(w http.ResponseWriter, r *http.Request) {
	q, err := queueAction(w, r)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	ctx, cancel := actionContext(r.Context())
	defer cancel()
	existed, err := s.cfg.Admin.DeleteLimits(ctx, q)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	detail := "none were set"
	if existed {
		detail = "removed"
	}
	s.audited(r, "queue.limits.delete", q, detail)
	s.writeJSON(w, r, http.StatusOK, limitsBody{Queue: q})
}

// limitsSummary names limits for the audit log, e.g. "rate=10/1s concurrency=5".
func limitsSummary(l *dtqtype.QueueLimits) string {
	out := ""
	add := func(s string) {
		if out != "" {
			out += " "
		}
		out += s
	}
	if l.Rate != nil {
		add("rate=" + strconv.Itoa(l.Rate.Limit) + "/" + time.Duration(l.Rate.Period).String())
		if l.Rate.Burst > 1 {
			add("burst=" + strconv.Itoa(l.Rate.Burst))
		}
	}
	if l.Concurrency > 0 {
		add("concurrency=" + strconv.Itoa(l.Concurrency))
	}
	if l.KeyConcurrency > 0 {
		add("key_concurrency=" + strconv.Itoa(l.KeyConcurrency))
	}
	if f := l.Fairness; f != nil {
		add("fairness=default:" + strconv.Itoa(max(1, f.DefaultWeight)))
		keys := make([]string, 0, len(f.Weights))
		for k := range f.Weights {
			keys = append(keys, k)
		}
		slices.Sort(keys)
		for i, k := range keys {
			if i == 10 {
				out += ",+" + strconv.Itoa(len(keys)-i) + " more"
				break
			}
			out += "," + k + ":" + strconv.Itoa(f.Weights[k])
		}
	}
	if l.KeyRate != nil {
		add("key_rate=" + strconv.Itoa(l.KeyRate.Limit) + "/" + time.Duration(l.KeyRate.Period).String())
		if l.KeyRate.Burst > 1 {
			add("key_burst=" + strconv.Itoa(l.KeyRate.Burst))
		}
	}
	if l.KeyOrder != "" {
		add("key_order=" + l.KeyOrder)
	}
	if l.Events != "" {
		add("events=" + l.Events)
	}
	return out
}
