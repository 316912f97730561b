package events

import (
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"
)

// Error codes used before a stream starts (the API's error envelope).
const (
	codeInvalidRequest     = "INVALID_REQUEST"
	codeUnavailable        = "REDIS_UNAVAILABLE"
	codeTooManySubscribers = "TOO_MANY_SUBSCRIBERS"
	codeForbidden          = "FORBIDDEN"
	codeInternal           = "INTERNAL_ERROR"
)

// subscriberRetryAfter is the Retry-After of a refused subscription.
const subscriberRetryAfter = "5"

// request is a parsed feed request: ?queue=&task_id=&type=&cursor=&since=,
// with Last-Event-ID taking precedence over ?cursor= (an EventSource
// reconnects to the same URL and sends its newest position in the header),
// and a cursor over ?since= (which only says where a first connection
// starts: a reconnect carries on from its cursor).
type request struct {
	filter Filter
	cursor *Cursor // nil = from now
}

var queryParams = []string{"queue", "task_id", "type", "cursor", "since"}

func parseRequest(r *http.Request) (*request, *FilterError) {
	q, err := url.ParseQuery(r.URL.RawQuery)
	if err != nil {
		return nil, &FilterError{Message: "the query string is malformed"}
	}
	for _, k := range slices.Sorted(maps.Keys(q)) {
		if !slices.Contains(queryParams, k) {
			return nil, &FilterError{Field: k, Message: "is not a known query parameter; accepted: " + strings.Join(queryParams, ", ")}
		}
		if len(q[k]) > 1 {
			return nil, &FilterError{Field: k, Message: "is given more than once"}
		}
	}
	req := &request{filter: Filter{
		Queues: splitList(q.Get("queue")),
		TaskID: strings.TrimSpace(q.Get("task_id")),
		Types:  splitList(q.Get("type")),
	}}
	if err := req.filter.Validate(); err != nil {
		var fe *FilterError
		errors.As(err, &fe)
		return nil, fe
	}
	field, raw := "cursor", q.Get("cursor")
	if v := r.Header.Get("Last-Event-ID"); v != "" {
		field, raw = "Last-Event-ID", v
	}
	if raw = strings.TrimSpace(raw); raw != "" {
		c, err := ParseCursor(raw)
		if errors.Is(err, ErrCursorTooLong) {
			return nil, &FilterError{Field: field, Message: fmt.Sprintf("is longer than %d bytes, so it is not a cursor issued by this feed; reconnect without one, or filter by queue", MaxCursorLen)}
		}
		if err != nil {
			return nil, &FilterError{Field: field, Message: "is not a cursor issued by this feed"}
		}
		req.cursor = c
	}
	if raw := strings.TrimSpace(q.Get("since")); raw != "" {
		since, ok := parseSince(raw)
		if !ok {
			return nil, &FilterError{Field: "since", Message: "must be an RFC 3339 time or epoch milliseconds, e.g. 2026-01-02T15:04:05Z"}
		}
		if req.cursor == nil {
			req.cursor = NewCursor(since)
		}
	}
	return req, nil
}

// subscribeRequest opens the subscription a feed request asks for, before
// anything is written: a bad query is answered 400 and a refused
// subscription 503, and then ok is false. The caller closes the
// subscription.
func (h *Hub) subscribeRequest(w http.ResponseWriter, r *http.Request) (sub *Subscription, ok bool) {
	req, fe := parseRequest(r)
	if fe != nil {
		h.writeBadRequest(w, r, fe)
		return nil, false
	}
	sub, err := h.Subscribe(r.Context(), req.filter, req.cursor)
	if err != nil {
		h.writeSubscribeError(w, r, err)
		return nil, false
	}
	return sub, true
}

// parseSince reads ?since=: RFC 3339 (with or without fractions) or epoch
// milliseconds, not before 1970.
func parseSince(s string) (time.Time, bool) {
	if ms, err := strconv.ParseInt(s, 10, 64); err == nil {
		return time.UnixMilli(ms), ms >= 0
	}
	t, err := time.Parse(time.RFC3339Nano, s)
	return t, err == nil && t.UnixMilli() >= 0
}

// writeBadRequest answers a bad query or cursor.
func (h *Hub) writeBadRequest(w http.ResponseWriter, r *http.Request, fe *FilterError) {
	details := map[string]any{}
	msg := fe.Message
	if fe.Field != "" {
		details["field"] = fe.Field
		msg = fe.Field + " " + fe.Message
	}
	h.cfg.WriteError(w, r, http.StatusBadRequest, codeInvalidRequest, msg, details)
}

// writeSubscribeError answers a failed Subscribe: the feed is full or
// shutting down.
func (h *Hub) writeSubscribeError(w http.ResponseWriter, r *http.Request, err error) {
	if errors.Is(err, ErrTooManySubscribers) {
		w.Header().Set("Retry-After", subscriberRetryAfter)
		h.cfg.WriteError(w, r, http.StatusServiceUnavailable, codeTooManySubscribers,
			fmt.Sprintf("this API process already serves %d event feed clients, its limit (DTQ_MAX_SUBSCRIBERS); retry later or use another API process", h.cfg.MaxSubscribers),
			map[string]any{"limit": h.cfg.MaxSubscribers})
		return
	}
	h.writeClosed(w, r)
}

func (h *Hub) writeClosed(w http.ResponseWriter, r *http.Request) {
	h.cfg.WriteError(w, r, http.StatusServiceUnavailable, codeUnavailable,
		"the event feed is shutting down; retry later", map[string]any{})
}

// writeErrorEnvelope is the default Config.WriteError: the API's error
// envelope, with the request id the API's middleware put on the response
// (or the client's).
func writeErrorEnvelope(w http.ResponseWriter, r *http.Request, status int, code, msg string, details map[string]any) {
	if details == nil {
		details = map[string]any{}
	}
	id := w.Header().Get("X-Request-ID")
	if id == "" {
		id = r.Header.Get("X-Request-ID")
	}
	b, err := json.Marshal(map[string]any{"code": code, "message": msg, "details": details, "request_id": id})
	if err != nil { // details the caller built would not encode
		b = mustJSON(map[string]any{"code": code, "message": msg, "details": map[string]any{}, "request_id": id})
	}
	b = append(b, '\n')
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Content-Length", strconv.Itoa(len(b)))
	w.Header().Set("X-Content-Type-Options", "nosniff")
	w.WriteHeader(status)
	_, _ = w.Write(b)
}
