package httpapi

import (
	"fmt"
	"net/http"
	"strings"
)

// scope says how a route meets a scoped key (docs/security.md): which queue the
// request is about, and so whether the key may make it.
type scope int

const (
	scopeOpen      scope = iota // an open route: no key, no scope
	scopeGlobal                 // shows every queue (metrics, workers, audit): refused
	scopePath                   // the {queue} path value
	scopeQuery                  // ?queue=; a key of one queue may leave it out
	scopeQueueList              // ?queue=a,b (event feed); empty means the key's queues
	scopeTaskID                 // the queue of the {id} or {task_id} path value
	scopeInHandler              // the handler checks (submissions, bulk DLQ, queue list)
)

// scopeError is a scoped key asking about a queue outside its scope
// (403 FORBIDDEN).
type scopeError struct {
	key    string
	queue  string // "" when the request named none
	queues []string
	global bool
}

func (e *scopeError) Error() string {
	switch {
	case e.global:
		return fmt.Sprintf("the key %q is limited to the queues %s; this endpoint shows every queue", e.key, strings.Join(e.queues, ", "))
	case e.queue == "":
		return fmt.Sprintf("the key %q is limited to the queues %s; name one with ?queue=", e.key, strings.Join(e.queues, ", "))
	}
	return fmt.Sprintf("the key %q is limited to the queues %s, not %q", e.key, strings.Join(e.queues, ", "), e.queue)
}

func (e *scopeError) apiError() *apiError {
	d := map[string]any{"queues": e.queues}
	if e.queue != "" {
		d["queue"] = e.queue
	}
	return &apiError{status: http.StatusForbidden, code: codeForbidden, message: e.Error(), details: d}
}

// requireScope returns a *scopeError unless the request's key may act on
// queue (every key may when it is not scoped, and in open mode).
func requireScope(r *http.Request, queue string) error {
	k, ok := KeyFromContext(r.Context())
	if !ok || k.Allows(queue) {
		return nil
	}
	return &scopeError{key: k.Name, queue: queue, queues: k.Queues}
}

// checkScope applies sc for the scoped key k. It may return r with its
// query rewritten to name the key's queues.
func (s *Server) checkScope(w http.ResponseWriter, r *http.Request, k APIKey, sc scope) (*http.Request, bool) {
	deny := func(queue string, global bool) (*http.Request, bool) {
		e := &scopeError{key: k.Name, queue: queue, queues: k.Queues, global: global}
		s.writeAPIError(w, r, e.apiError())
		return r, false
	}
	switch sc {
	case scopeGlobal:
		return deny("", true)
	case scopePath:
		if q := r.PathValue("queue"); !k.Allows(q) {
			return deny(q, false)
		}
	case scopeQuery:
		q := r.URL.Query()
		name := q.Get("queue")
		if name == "" && len(q["queue"]) <= 1 {
			if len(k.Queues) != 1 {
				return deny("", false)
			}
			return withQuery(r, "queue", k.Queues[0]), true
		}
		for _, v := range q["queue"] {
			if !k.Allows(v) {
				return deny(v, false)
			}
		}
	case scopeQueueList:
		raw := r.URL.Query().Get("queue")
		if strings.TrimSpace(raw) == "" {
			return withQuery(r, "queue", strings.Join(k.Queues, ",")), true
		}
		for v := range strings.SplitSeq(raw, ",") {
			if v = strings.TrimSpace(v); !k.Allows(v) {
				return deny(v, false)
			}
		}
	case scopeTaskID:
		id := r.PathValue("id")
		if id == "" {
			id = r.PathValue("task_id")
		}
		q, err := s.cfg.Inspector.TaskQueue(r.Context(), id)
		if err != nil {
			return r, true // the handler answers the unknown id or the outage
		}
		if !k.Allows(q) {
			return deny(q, false)
		}
	case scopeOpen, scopeInHandler: // no key needed, or the handler checks
	}
	return r, true
}

// withQuery returns a shallow copy of r whose query sets name to value.
func withQuery(r *http.Request, name, value string) *http.Request {
	r2 := r.Clone(r.Context())
	q := r2.URL.Query()
	q.Set(name, value)
	r2.URL.RawQuery = q.Encode()
	return r2
}
