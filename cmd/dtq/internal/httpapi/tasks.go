package httpapi

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"maps"
	"math"
	"mime"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/dtq-io/dtq"
	"github.com/dtq-io/dtq/cmd/dtq/internal/wire"
	"github.com/dtq-io/dtq/dtqtype"
)

// maxWait bounds GET /api/v1/tasks/{id}?wait=.
const maxWait = 60 * time.Second

// taskResponse is a submission's answer: the task plus whether it replayed
// an earlier submission, and what deduplication did (docs/deduplication.md).
type taskResponse struct {
	*dtqtype.TaskInfo
	Duplicate bool `json:"duplicate"`
	// Deduplicated is the mode that collapsed the submission into the task
	// shown (its dedup key's task); absent when it was not collapsed.
	Deduplicated string `json:"deduplicated,omitempty"`
	// ReplacedTaskID is the queued task a replace or keep_last submission
	// cancelled for this one.
	ReplacedTaskID string `json:"replaced_task_id,omitempty"`
}

// DedupHeader names the mode that collapsed a submission into its dedup
// key's task (200): drop, throttle or debounce.
const DedupHeader = "Dtq-Deduplicated"

// AppendJSON appends the bytes json.Marshal gives for r: the task's members
// (none for a nil task), then duplicate, deduplicated and replaced_task_id.
// It shadows the method promoted from *TaskInfo, which would leave them
// out. It fails only where json.Marshal does, leaving b as it was.
func (r taskResponse) AppendJSON(b []byte) ([]byte, error) {
	if r.TaskInfo == nil {
		b = append(b, `{"duplicate":`...)
	} else {
		var err error
		if b, err = r.TaskInfo.AppendJSON(b); err != nil {
			return b, err
		}
		b = append(b[:len(b)-1], `,"duplicate":`...) // reopen the task's object
	}
	b = strconv.AppendBool(b, r.Duplicate)
	if r.Deduplicated != "" {
		b = append(b, `,"deduplicated":`...)
		b = strconv.AppendQuote(b, r.Deduplicated) // a mode name: plain ASCII
	}
	if r.ReplacedTaskID != "" {
		b = append(b, `,"replaced_task_id":`...)
		b = strconv.AppendQuote(b, r.ReplacedTaskID) // hex digits
	}
	return append(b, '}'), nil
}

// submitTask is POST /api/v1/tasks (docs/http-api.md, docs/idempotency.md).
func (s *Server) submitTask(w http.ResponseWriter, r *http.Request) {
	if err := requireJSON(r); err != nil {
		s.writeError(w, r, err)
		return
	}
	key, hasKey, err := idempotencyHeader(r)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	body, err := readBody(w, r, s.maxBody)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	var sub dtq.Submission
	if err := sub.UnmarshalJSON(body); err != nil {
		s.writeError(w, r, err)
		return
	}
	if hasKey {
		sub.IdempotencyKey = key // the header wins over the body
	}
	withTraceContext(r, &sub)
	if err := requireScope(r, queueOf(sub)); err != nil {
		s.writeError(w, r, err)
		return
	}
	res, err := s.cfg.Client.Submit(r.Context(), sub)
	s.metrics.observeSubmit(res, err)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	status := http.StatusAccepted
	switch {
	case res.Duplicate:
		status = http.StatusOK
		w.Header().Set("Idempotent-Replayed", "true")
	case res.Deduplicated != "":
		status = http.StatusOK
		w.Header().Set(DedupHeader, string(res.Deduplicated))
	default:
		s.warnUnserved(w, r, []string{queueOf(sub)})
	}
	w.Header().Set("Location", "/api/v1/tasks/"+res.TaskID)
	s.writeJSON(w, r, status, submitAnswer(res))
}

// submitAnswer is the answer body of a submission that res answered.
func submitAnswer(res *dtq.SubmitResult) taskResponse {
	out := taskResponse{TaskInfo: res.Task, Duplicate: res.Duplicate, Deduplicated: string(res.Deduplicated),
		ReplacedTaskID: res.Replaced}
	return out
}

// batchItem is one entry of POST /api/v1/tasks/batch's answer.
type batchItem struct {
	Index          int               `json:"index"`
	HTTPStatus     int               `json:"http_status"`
	Duplicate      bool              `json:"duplicate"`
	Deduplicated   string            `json:"deduplicated,omitempty"`
	ReplacedTaskID string            `json:"replaced_task_id,omitempty"`
	Task           *dtqtype.TaskInfo `json:"task,omitempty"`
	Error          *errorBody        `json:"error,omitempty"`
}

// submitBatch is POST /api/v1/tasks/batch: each item is decoded, validated
// and deduplicated on its own; the answer is 200 with one result per item,
// in order.
func (s *Server) submitBatch(w http.ResponseWriter, r *http.Request) {
	if err := requireJSON(r); err != nil {
		s.writeError(w, r, err)
		return
	}
	if len(r.Header.Values("Idempotency-Key")) > 0 {
		s.writeError(w, r, badRequest("Idempotency-Key",
			"a batch takes an idempotency_key inside each task, not the Idempotency-Key header"))
		return
	}
	body, err := readBody(w, r, maxBatchBodyBytes)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	raws, err := decodeBatch(body)
	if err != nil {
		s.writeError(w, r, err)
		return
	}

	items := make([]batchItem, len(raws))
	var accepted []string // queues that got a new task, each once
	seen := map[string]bool{}
	subs := make([]dtq.Submission, 0, len(raws))
	at := make([]int, 0, len(raws)) // subs[j] is item at[j]
	for i, raw := range raws {
		items[i].Index = i
		var sub dtq.Submission
		err := sub.UnmarshalJSON(raw)
		if err == nil {
			withTraceContext(r, &sub)
			err = requireScope(r, queueOf(sub))
		}
		if err != nil {
			items[i].HTTPStatus, items[i].Error = s.itemError(r, i, err)
			continue
		}
		subs = append(subs, sub)
		at = append(at, i)
	}
	if len(subs) > 0 {
		results, err := s.cfg.Client.SubmitBatch(r.Context(), subs)
		if err != nil {
			s.writeError(w, r, err)
			return
		}
		for j, res := range results {
			it := &items[at[j]]
			s.metrics.observeSubmit(res.Result, res.Err)
			if res.Err != nil {
				it.HTTPStatus, it.Error = s.itemError(r, it.Index, res.Err)
				continue
			}
			a := submitAnswer(res.Result)
			it.HTTPStatus, it.Duplicate, it.Task = http.StatusAccepted, a.Duplicate, a.TaskInfo
			it.Deduplicated, it.ReplacedTaskID = a.Deduplicated, a.ReplacedTaskID
			if a.Duplicate || a.Deduplicated != "" {
				it.HTTPStatus = http.StatusOK
			} else if !seen[it.Task.Queue] {
				seen[it.Task.Queue] = true
				accepted = append(accepted, it.Task.Queue)
			}
		}
	}
	s.warnUnserved(w, r, accepted)
	s.writeJSON(w, r, http.StatusOK, map[string]any{"items": items})
}

// maxTracestate is the longest tracestate header copied into metadata: the
// W3C recommendation says 512 characters reach every vendor.
const maxTracestate = 512

// withTraceContext copies the request's W3C trace context headers,
// traceparent and tracestate, into sub's metadata under the same names, so
// a worker's tracing middleware (package dtqotel) continues the caller's
// trace. Metadata that has a traceparent already is left alone, as is
// metadata that is not an object (Submit says why). A missing or malformed
// traceparent copies nothing, and a malformed or overlong tracestate is
// dropped: trace context never fails a submission.
func withTraceContext(r *http.Request, sub *dtq.Submission) {
	tp := r.Header.Values("Traceparent")
	if len(tp) != 1 || !validTraceparent(tp[0]) {
		return
	}
	raw, _ := sub.Metadata.(json.RawMessage) // what Submission.UnmarshalJSON gives
	raw = bytes.TrimSpace(raw)
	var meta map[string]json.RawMessage
	if len(raw) > 0 && string(raw) != "null" {
		if raw[0] != '{' || json.Unmarshal(raw, &meta) != nil {
			return
		}
		if _, ok := meta["traceparent"]; ok {
			return
		}
	}
	// Splice the members in front, keeping the body's members as written.
	b := append([]byte(`{"traceparent":`), strconv.Quote(tp[0])...)
	ts := strings.Join(r.Header.Values("Tracestate"), ",") // repeated headers are one list
	if _, ok := meta["tracestate"]; !ok && ts != "" && len(ts) <= maxTracestate && printableASCII(ts) {
		b = append(append(b, `,"tracestate":`...), strconv.Quote(ts)...)
	}
	if len(meta) > 0 {
		b = append(append(b, ','), raw[1:]...)
	} else {
		b = append(b, '}')
	}
	sub.Metadata = json.RawMessage(b)
}

// validTraceparent reports whether v has the form of a W3C version-00
// traceparent: 00-<32 hex trace id>-<16 hex parent id>-<2 hex flags>.
func validTraceparent(v string) bool {
	if len(v) != 55 || v[2] != '-' || v[35] != '-' || v[52] != '-' {
		return false
	}
	for i := range len(v) {
		if i == 2 || i == 35 || i == 52 {
			continue
		}
		if !lowerHexByte(v[i]) {
			return false
		}
	}
	return true
}

// lowerHexByte reports whether c is a lowercase hex digit, as traceparent
// requires.
func lowerHexByte(c byte) bool {
	return c >= '0' && c <= '9' || c >= 'a' && c <= 'f'
}

// printableASCII reports whether s is all 0x20..0x7e: strconv.Quote then
// writes it as valid JSON.
func printableASCII(s string) bool {
	for i := range len(s) {
		if s[i] < 0x20 || s[i] > 0x7e {
			return false
		}
	}
	return true
}

// queueOf is the queue a submission goes to.
func queueOf(sub dtq.Submission) string {
	if sub.Queue == "" {
		return dtq.DefaultQueue
	}
	return sub.Queue
}

// decodeBatch returns the raw tasks of a batch body {"tasks": [...]}.
func decodeBatch(body []byte) ([]json.RawMessage, error) {
	body = bytes.TrimSpace(body)
	var top map[string]json.RawMessage
	if len(body) == 0 || body[0] != '{' || json.Unmarshal(body, &top) != nil {
		return nil, badRequest("", `the body must be a JSON object like {"tasks": [{"task_type": "echo"}]}`)
	}
	for _, k := range slices.Sorted(maps.Keys(top)) {
		if k != "tasks" {
			return nil, badRequest(k, `is not a known field; the body is {"tasks": [...]}`)
		}
	}
	raw, ok := top["tasks"]
	if !ok {
		return nil, badRequest("tasks", "is required")
	}
	var tasks []json.RawMessage
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 || raw[0] != '[' || json.Unmarshal(raw, &tasks) != nil {
		return nil, badRequest("tasks", "must be an array of task objects")
	}
	if len(tasks) < 1 || len(tasks) > maxBatchTasks {
		return nil, badRequest("tasks", "must hold 1..%d tasks, got %d", maxBatchTasks, len(tasks))
	}
	return tasks, nil
}

// getTask is GET /api/v1/tasks/{id}[?wait=].
func (s *Server) getTask(w http.ResponseWriter, r *http.Request) {
	q, err := parseQuery(r, "wait")
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	wait, err := parseWait(q.Get("wait"))
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	id := r.PathValue("id")
	var t *dtqtype.TaskInfo
	if wait > 0 {
		c := caller(r)
		if scope, limit := s.waits.acquire(c); scope != "" {
			s.writeAPIError(w, r, tooManyWaits(scope, limit))
			return
		}
		defer s.waits.release(c)
		t, err = s.watches.await(r.Context(), id, wait)
	} else {
		t, err = s.cfg.Inspector.GetTask(r.Context(), id)
	}
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	s.writeJSON(w, r, http.StatusOK, t)
}

// parseWait reads ?wait=: a Go duration ("30s") or bare seconds ("1.5"),
// 0..60s; "" = no wait.
func parseWait(v string) (time.Duration, error) {
	if v == "" {
		return 0, nil
	}
	bad := badRequest("wait", "must be a duration like 30s or a number of seconds, between 0 and 60s")
	d, err := time.ParseDuration(v)
	if err != nil {
		f, ferr := strconv.ParseFloat(v, 64)
		if ferr != nil || math.IsNaN(f) || f < 0 || f > maxWait.Seconds() {
			return 0, bad
		}
		d = time.Duration(f * float64(time.Second))
	}
	if d < 0 || d > maxWait {
		return 0, bad
	}
	return d, nil
}

// listTasks is GET /api/v1/tasks?queue=&status=&type=&limit=&cursor=.
func (s *Server) listTasks(w http.ResponseWriter, r *http.Request) {
	q, err := parseQuery(r, "queue", "status", "type", "limit", "cursor")
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	p := &dtq.TaskListParams{Queue: q.Get("queue"), Status: dtqtype.Status(q.Get("status")), Type: q.Get("type"), Cursor: q.Get("cursor")}
	if q.Has("limit") {
		n, err := strconv.Atoi(q.Get("limit"))
		if err != nil || n < 1 || n > dtqtype.MaxListLimit {
			s.writeError(w, r, badRequest("limit", "must be an integer between 1 and 1000"))
			return
		}
		p.Limit = n
	}
	res, err := s.cfg.Inspector.ListTasks(r.Context(), p)
	if ve, ok := errors.AsType[*dtq.ValidationError](err); ok {
		err = badRequest(ve.Field, "%s", ve.Message) // a query error, not a task's
	}
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	s.writeJSON(w, r, http.StatusOK, res)
}

// parseQuery parses r's query string, refusing unknown parameters and
// repeated ones so that a misspelt filter is never silently ignored.
func parseQuery(r *http.Request, allowed ...string) (url.Values, error) {
	q, err := url.ParseQuery(r.URL.RawQuery)
	if err != nil {
		return nil, badRequest("", "the query string is malformed")
	}
	for _, k := range slices.Sorted(maps.Keys(q)) {
		if !slices.Contains(allowed, k) {
			if len(allowed) == 0 {
				return nil, badRequest(k, "is not a known query parameter; this endpoint takes none")
			}
			return nil, badRequest(k, "is not a known query parameter; accepted: %s", strings.Join(allowed, ", "))
		}
		if len(q[k]) > 1 {
			return nil, badRequest(k, "is given more than once")
		}
	}
	return q, nil
}

// requireJSON refuses bodies not declared as JSON. Besides catching
// mistakes, it means a browser page cannot post to the API with a "simple"
// cross-site request (form or text/plain), which matters in open mode.
func requireJSON(r *http.Request) error {
	mt, _, err := mime.ParseMediaType(r.Header.Get("Content-Type"))
	if err != nil || (mt != "application/json" && !strings.HasSuffix(mt, "+json")) {
		return &requestError{status: http.StatusUnsupportedMediaType, field: "Content-Type",
			message: "the body must be JSON sent with Content-Type: application/json"}
	}
	return nil
}

// idempotencyHeader returns the Idempotency-Key header as sent (the client
// unquotes and checks it, once), and whether there was one.
func idempotencyHeader(r *http.Request) (string, bool, error) {
	v := r.Header.Values("Idempotency-Key")
	switch len(v) {
	case 0:
		return "", false, nil
	case 1:
		if err := wire.CheckIdempotencyKey(v[0]); err != nil {
			return "", false, err
		}
		return v[0], true, nil
	}
	return "", false, badRequest("Idempotency-Key", "is given more than once")
}

// readBody reads at most limit bytes of r's body; more is a
// *http.MaxBytesError (413). The bytes count against the server's budget
// of bodies in flight until the request is answered; past it the answer is
// errServerBusy (503 SERVER_BUSY).
func readBody(w http.ResponseWriter, r *http.Request, limit int64) ([]byte, error) {
	if r.ContentLength > limit {
		return nil, &http.MaxBytesError{Limit: limit}
	}
	b, err := readAllReserved(r, http.MaxBytesReader(w, r.Body, limit), r.ContentLength)
	var tb *http.MaxBytesError
	if errors.As(err, &tb) || errors.Is(err, errServerBusy) {
		return nil, err
	}
	if err != nil {
		return nil, badRequest("", "the request body could not be read")
	}
	// JSON text is UTF-8 (RFC 8259); decoding would silently replace bad
	// bytes in strings, storing something the client did not send.
	if !utf8.Valid(b) {
		return nil, badRequest("", "the request body is not valid UTF-8; JSON must be sent as UTF-8")
	}
	return b, nil
}

// listAll follows a list's pages from the first and returns every item.
// page reads the page at cursor.
func listAll[T any](ctx context.Context, page func(ctx context.Context, cursor string) (*dtqtype.ListResult[T], error)) ([]T, error) {
	var all []T
	for cursor := ""; ; {
		res, err := page(ctx, cursor)
		if err != nil {
			return nil, err
		}
		all = append(all, res.Items...)
		if res.NextCursor == "" {
			return all, nil
		}
		cursor = res.NextCursor
	}
}

// allWorkers reads every worker record, a page of MaxListLimit at a time
// (the records are bounded by DTQ_MAX_WORKERS).
func allWorkers(ctx context.Context, in *dtq.Inspector) ([]*dtqtype.WorkerInfo, error) {
	return listAll(ctx, func(ctx context.Context, cursor string) (*dtqtype.ListResult[*dtqtype.WorkerInfo], error) {
		return in.ListWorkers(ctx, &dtq.WorkerListParams{Cursor: cursor, Limit: dtqtype.MaxListLimit})
	})
}

// parseLimit reads ?limit= (1..1000); absent = 0, the library's default.
func parseLimit(q map[string][]string) (int, error) {
	v, ok := q["limit"]
	if !ok {
		return 0, nil
	}
	n, err := strconv.Atoi(v[0])
	if err != nil || n < 1 || n > dtqtype.MaxListLimit {
		return 0, badRequest("limit", "limit: must be an integer between 1 and 1000")
	}
	return n, nil
}
