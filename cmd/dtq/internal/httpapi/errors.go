package httpapi

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"net"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"syscall"

	"github.com/redis/go-redis/v9"

	"github.com/dtq-io/dtq"
	"github.com/dtq-io/dtq/dtqtype"
)

// Error codes (docs/http-api.md, "Errors").
const (
	codeInvalidRequest   = "INVALID_REQUEST"
	codeInvalidTask      = "INVALID_TASK"
	codeUnknownTaskType  = "UNKNOWN_TASK_TYPE"
	codeUnauthorized     = "UNAUTHORIZED"
	codeForbidden        = "FORBIDDEN"
	codeTaskNotFound     = "TASK_NOT_FOUND"
	codeDLQNotFound      = "DLQ_ENTRY_NOT_FOUND"
	codeWorkerNotFound   = "WORKER_NOT_FOUND"
	codeQueueNotFound    = "QUEUE_NOT_FOUND"
	codeScheduleNotFound = "SCHEDULE_NOT_FOUND"
	codeNotFound         = "NOT_FOUND" // no such endpoint
	codeIdemInProgress   = "IDEMPOTENCY_IN_PROGRESS"
	codeTaskTerminal     = "TASK_TERMINAL"
	codeTaskConflict     = "TASK_CONFLICT"
	codeLeaseLost        = "LEASE_LOST"
	codeWorkerIDInUse    = "WORKER_ID_IN_USE"
	codeQueueNotEmpty    = "QUEUE_NOT_EMPTY"
	// A queue asked for other partitions than it has (docs/partitions.md).
	codePartitionsConflict = "PARTITIONS_CONFLICT"
	codePayloadTooLarge    = "PAYLOAD_TOO_LARGE"
	codeIdemKeyMismatch    = "IDEMPOTENCY_KEY_MISMATCH"
	codeQueueFull          = "QUEUE_FULL"
	codeTooManyWorkers     = "TOO_MANY_WORKERS"
	codeInternal           = "INTERNAL_ERROR"
	codeRedisUnavailable   = "REDIS_UNAVAILABLE"
	codeOutcomeUnknown     = "OUTCOME_UNKNOWN"
	codeServerBusy         = "SERVER_BUSY"
	codeTooManyWaits       = "TOO_MANY_WAITS"
	// Workflows (docs/http-api.md#workflows).
	codeInvalidWorkflow    = "INVALID_WORKFLOW"
	codeWorkflowNotRunning = "WORKFLOW_NOT_RUNNING"
	// A progress report within a second of the attempt's last write
	// (docs/progress.md).
	codeProgressTooSoon = "PROGRESS_TOO_SOON"
	// TOO_MANY_SUBSCRIBERS is answered by the event feed (internal/events)
	// when DTQ_MAX_SUBSCRIBERS clients are open.
)

// errorBody is the error envelope, top-level and per batch item.
type errorBody struct {
	Code      string         `json:"code"`
	Message   string         `json:"message"`
	Details   map[string]any `json:"details"`
	RequestID string         `json:"request_id"`
}

// apiError is an error answer before it is written.
type apiError struct {
	status     int
	code       string
	message    string
	details    map[string]any
	retryAfter int // seconds; set for QUEUE_FULL and TOO_MANY_WORKERS
}

func (e *apiError) body(requestID string) *errorBody {
	d := e.details
	if d == nil {
		d = map[string]any{}
	}
	return &errorBody{Code: e.code, Message: e.message, Details: d, RequestID: requestID}
}

// tooManyWaits refuses a long-poll past a bound: scope "key" (this
// caller's) or "total" (the process's).
func tooManyWaits(scope string, limit int) *apiError {
	what := map[string]string{"key": "DTQ_MAX_WAITS_PER_KEY long-polls for this key", "total": "DTQ_MAX_WAITS long-polls (task waits and waiting claims)"}[scope]
	return &apiError{status: http.StatusTooManyRequests, code: codeTooManyWaits, retryAfter: 1,
		message: fmt.Sprintf("this API process already holds %s (%d); retry after Retry-After seconds, or without wait", what, limit),
		details: map[string]any{"scope": scope, "limit": limit}}
}

func internalError() *apiError {
	return &apiError{status: http.StatusInternalServerError, code: codeInternal,
		message: "an internal error occurred; the server log has the details under this request id"}
}

// requestError is a malformed request: a bad query parameter, header or
// body framing (400 INVALID_REQUEST, details.field when one is to blame).
type requestError struct {
	status  int // 0 = 400
	field   string
	message string
}

func (e *requestError) Error() string { return e.message }

func badRequest(field, format string, args ...any) *requestError {
	return &requestError{field: field, message: fmt.Sprintf(format, args...)}
}

// classify maps err to its answer, or nil when err is unexpected (a bug or an
// unknown failure), which becomes a logged 500.
func classify(err error) *apiError {
	var (
		re  *requestError
		tb  *http.MaxBytesError
		ve  *dtq.ValidationError
		qf  *dtq.QueueFullError
		tw  *dtq.TooManyWorkersError
		ic  *dtq.IdempotencyConflictError
		ou  *dtq.OutcomeUnknownError
		se  *dtq.TaskStateError
		qe  *dtq.QueueNotEmptyError
		pc  *dtq.PartitionsConflictError
		msg = strings.TrimPrefix(err.Error(), "dtq: ")
	)
	var sce *scopeError
	if e := classifyWorkflow(err); e != nil {
		return e
	}
	switch {
	case errors.As(err, &sce):
		return sce.apiError()
	case errors.As(err, &re):
		e := &apiError{status: re.status, code: codeInvalidRequest, message: re.message}
		if e.status == 0 {
			e.status = http.StatusBadRequest
		}
		if re.field != "" {
			e.details = map[string]any{"field": re.field}
		}
		return e
	case errors.Is(err, errServerBusy):
		return &apiError{status: http.StatusServiceUnavailable, code: codeServerBusy, retryAfter: 1,
			message: "the server holds as many request bodies as it may (DTQ_MAX_BODY_BYTES_IN_FLIGHT); nothing was written: retry after Retry-After seconds"}
	case errors.As(err, &tb):
		return &apiError{status: http.StatusRequestEntityTooLarge, code: codePayloadTooLarge,
			message: fmt.Sprintf("the request body exceeds %d bytes", tb.Limit),
			details: map[string]any{"limit_bytes": tb.Limit}}
	case errors.Is(err, dtq.ErrInvalidJSON):
		return &apiError{status: http.StatusBadRequest, code: codeInvalidRequest, message: msg}
	case errors.As(err, &ve):
		e := &apiError{status: http.StatusBadRequest, code: codeInvalidTask, message: msg,
			details: map[string]any{"field": ve.Field}}
		switch {
		case errors.Is(err, dtq.ErrUnknownTaskType):
			e.code = codeUnknownTaskType
			e.message += unknownTaskTypeHint
		case errors.Is(err, dtq.ErrPayloadTooLarge):
			e.status, e.code = http.StatusRequestEntityTooLarge, codePayloadTooLarge
		}
		return e
	case errors.As(err, &pc):
		return &apiError{status: http.StatusConflict, code: codePartitionsConflict, message: msg,
			details: map[string]any{"queue": pc.Queue, "partitions": pc.Has}}
	case errors.As(err, &qf):
		e := &apiError{status: http.StatusTooManyRequests, code: codeQueueFull,
			message:    fmt.Sprintf("queue %q is full (%d of %d live tasks); retry later", qf.Queue, qf.Depth, qf.Limit),
			details:    map[string]any{"queue": qf.Queue, "depth": qf.Depth, "limit": qf.Limit},
			retryAfter: max(1, int(math.Ceil(qf.RetryAfter.Seconds())))}
		if qf.Partition != nil {
			e.message = fmt.Sprintf("queue %q is full in partition %d (%d of its %d live tasks: the queue's bound is shared by its partitions); retry later",
				qf.Queue, *qf.Partition, qf.Depth, qf.Limit)
			e.details["partition"] = *qf.Partition
		}
		return e
	case errors.As(err, &tw):
		bound := "DTQ_MAX_WORKERS"
		if tw.Scope == "key" {
			bound = "DTQ_MAX_WORKERS_PER_KEY"
		}
		return &apiError{status: http.StatusTooManyRequests, code: codeTooManyWorkers,
			message: fmt.Sprintf("%d of %d worker records (%s) are in use, so a new worker id is not registered; "+
				"reuse a worker id, or retry after records silent for an hour can be evicted", tw.Count, tw.Limit, bound),
			details:    map[string]any{"scope": tw.Scope, "count": tw.Count, "limit": tw.Limit},
			retryAfter: max(1, int(math.Ceil(tw.RetryAfter.Seconds())))}
	case errors.As(err, &ic):
		e := &apiError{status: http.StatusConflict, code: codeIdemInProgress,
			message: "a task with this idempotency key is still in progress; retry later to get its outcome",
			details: map[string]any{"task_id": ic.TaskID}}
		if errors.Is(err, dtq.ErrIdempotencyKeyMismatch) {
			e.status, e.code = http.StatusUnprocessableEntity, codeIdemKeyMismatch
			e.message = "this idempotency key was used with a different request; use a new key for different work"
		}
		return e
	case errors.As(err, &se):
		return taskStateError(se, "")
	case errors.Is(err, dtq.ErrInvalidCursor):
		return &apiError{status: http.StatusBadRequest, code: codeInvalidRequest,
			message: "cursor: is not a cursor this list returned (a cursor of another list, or of an older dtq, is not); start again without one",
			details: map[string]any{"field": "cursor"}}
	case errors.Is(err, dtq.ErrLeaseLost):
		return &apiError{status: http.StatusConflict, code: codeLeaseLost,
			message: "this lease_token no longer owns the task (its lease expired and the task was reclaimed, or it finished), or is not one this deployment issued for it; nothing was written: drop the task and claim again"}
	case errors.Is(err, dtq.ErrWorkerIDInUse):
		return &apiError{status: http.StatusConflict, code: codeWorkerIDInUse,
			message: "a live Go worker uses this worker_id; give each HTTP worker its own id"}
	case errors.Is(err, dtq.ErrTaskNotFound):
		return &apiError{status: http.StatusNotFound, code: codeTaskNotFound, message: "no task has this id (or its retention has passed)"}
	case errors.Is(err, dtq.ErrDLQEntryNotFound):
		return &apiError{status: http.StatusNotFound, code: codeDLQNotFound,
			message: "this task is not in the dead-letter queue (no such task, or it was requeued or discarded)"}
	case errors.Is(err, dtq.ErrScheduleNotFound):
		return &apiError{status: http.StatusNotFound, code: codeScheduleNotFound,
			message: "no schedule has this name; GET /api/v1/schedules lists them"}
	case errors.Is(err, dtq.ErrWorkerNotFound):
		return &apiError{status: http.StatusNotFound, code: codeWorkerNotFound,
			message: "no worker with this id heartbeated in the last 24 hours"}
	case errors.As(err, &qe):
		return &apiError{status: http.StatusConflict, code: codeQueueNotEmpty,
			message: fmt.Sprintf("queue %q still holds %d %s tasks; only an empty queue can be deleted (cancel, purge or wait for them, and purge its dead-letter queue)", qe.Queue, qe.Count, strings.ReplaceAll(qe.What, "_", "-")),
			details: map[string]any{"queue": qe.Queue, "holds": qe.What, "count": qe.Count}}
	case errors.Is(err, dtq.ErrQueueNotFound):
		m := "no such queue: nothing was ever submitted to it, or it was deleted"
		if msg != strings.TrimPrefix(dtq.ErrQueueNotFound.Error(), "dtq: ") { // a wrapped one says more
			m = msg
		}
		return &apiError{status: http.StatusNotFound, code: codeQueueNotFound, message: m}
	case errors.As(err, &ou):
		e := &apiError{status: http.StatusServiceUnavailable, code: codeOutcomeUnknown, retryAfter: 1,
			details: map[string]any{"task_id": ou.TaskID, "queue": ou.Queue}}
		if ou.Key != "" {
			e.details["idempotency_key"] = ou.Key
			e.message = fmt.Sprintf("Redis stopped answering after the submission was sent: task %s may or may not exist; "+
				"submit again with the same idempotency key (safe: it maps to that task if it exists)", ou.TaskID)
		} else {
			e.message = fmt.Sprintf("Redis stopped answering after the submission was sent: task %s may or may not exist; "+
				"look it up with GET /api/v1/tasks/%s before submitting again, or submit with an Idempotency-Key so that a retry is safe", ou.TaskID, ou.TaskID)
		}
		return e
	case errors.Is(err, dtq.ErrNotReplicated):
		return &apiError{status: http.StatusServiceUnavailable, code: codeRedisUnavailable,
			message: "Redis did not replicate the write to enough replicas in time; it may not have happened: retry (with the same idempotency key for a submission)"}
	case redis.IsOOMError(err):
		return &apiError{status: http.StatusServiceUnavailable, code: codeRedisUnavailable,
			message: "Redis is out of memory (it reached maxmemory and evicts nothing): nothing was written; " +
				"retry later, and have an operator raise maxmemory or shorten DTQ_SUCCEEDED_RETENTION / DTQ_FAILED_RETENTION"}
	case redisUnavailable(err):
		return &apiError{status: http.StatusServiceUnavailable, code: codeRedisUnavailable,
			message: "Redis is unavailable; retry later"}
	}
	return nil
}

// taskStateError answers an action refused because of the task's status:
// 409 TASK_TERMINAL for a finished task, TASK_CONFLICT otherwise. hint says
// what the action needs ("" = a generic message).
func taskStateError(se *dtq.TaskStateError, hint string) *apiError {
	e := &apiError{status: http.StatusConflict, code: codeTaskConflict,
		details: map[string]any{"task_id": se.TaskID, "status": se.Status}}
	if errors.Is(se, dtq.ErrTaskTerminal) {
		e.code = codeTaskTerminal
	}
	switch {
	case hint != "":
		e.message = fmt.Sprintf("task %s is %s: %s", se.TaskID, se.Status, hint)
	case e.code == codeTaskTerminal:
		e.message = fmt.Sprintf("task %s is %s: a finished task does not change any more", se.TaskID, se.Status)
	default:
		e.message = fmt.Sprintf("task %s is %s, which does not allow this action", se.TaskID, se.Status)
	}
	return e
}

// unknownTaskTypeHint ends the message of a task type the server refuses:
// the list is the server's configuration, which the caller may not know.
const unknownTaskTypeHint = "; this server accepts only the task types listed in its DTQ_TASK_TYPES (unset, it accepts any)"

// queryError turns a library *ValidationError about a query value into 400
// INVALID_REQUEST (INVALID_TASK is for submissions); other errors pass.
func queryError(err error) error {
	if ve, ok := errors.AsType[*dtq.ValidationError](err); ok {
		if errors.Is(err, dtq.ErrUnknownTaskType) {
			return badRequest(ve.Field, "%s: %s%s", ve.Field, ve.Message, unknownTaskTypeHint)
		}
		return badRequest(ve.Field, "%s: %s", ve.Field, ve.Message)
	}
	return err
}

// redisUnavailable reports whether err means Redis could not serve the
// request for now: no connection, a timeout, or a server that is loading,
// read-only or failing over (out of memory has its own answer in classify).
func redisUnavailable(err error) bool {
	var ne net.Error
	switch {
	case errors.As(err, &ne),
		errors.Is(err, io.EOF), errors.Is(err, io.ErrUnexpectedEOF),
		errors.Is(err, syscall.ECONNREFUSED), errors.Is(err, syscall.ECONNRESET), errors.Is(err, syscall.EPIPE),
		errors.Is(err, context.DeadlineExceeded), errors.Is(err, context.Canceled),
		errors.Is(err, redis.ErrClosed), errors.Is(err, redis.ErrPoolTimeout), errors.Is(err, redis.ErrPoolExhausted),
		redis.IsLoadingError(err), redis.IsReadOnlyError(err), redis.IsClusterDownError(err),
		redis.IsTryAgainError(err), redis.IsMasterDownError(err), redis.IsMaxClientsError(err),
		redis.IsNoReplicasError(err):
		return true
	}
	// The same states by their reply's first word, however the reply came
	// (a script's error, a wrapped reply), and a slot still moving between
	// masters (a failover, a resharding) after go-redis followed its
	// redirections: the slot map settles.
	for _, prefix := range []string{"MOVED", "ASK", "CLUSTERDOWN", "TRYAGAIN", "LOADING", "READONLY", "MASTERDOWN"} {
		if redis.HasErrorPrefix(err, prefix+" ") {
			return true
		}
	}
	return false
}

// writeError answers err, logging it when it is unexpected (the body then
// says nothing about it) or a Redis outage.
func (s *Server) writeError(w http.ResponseWriter, r *http.Request, err error) {
	e := classify(err)
	switch {
	case r.Context().Err() != nil:
		// The client went away, whatever the error says about it (a read
		// cut short can look like a Redis failure); nobody reads this answer.
		s.log.DebugContext(r.Context(), "request abandoned by the client", "request_id", RequestIDFromContext(r.Context()))
		if e == nil {
			e = internalError()
		}
	case e == nil:
		s.log.ErrorContext(r.Context(), "request failed", "request_id", RequestIDFromContext(r.Context()),
			"method", clean(r.Method), "path", clean(r.URL.Path), "err", clean(err.Error()))
		e = internalError()
	case e.code == codeServerBusy:
		s.log.DebugContext(r.Context(), "request body refused: the body budget is spent", "request_id", RequestIDFromContext(r.Context()))
	case e.status == http.StatusServiceUnavailable:
		s.log.WarnContext(r.Context(), "redis unavailable", "request_id", RequestIDFromContext(r.Context()),
			"method", clean(r.Method), "path", clean(r.URL.Path), "err", clean(err.Error()))
	}
	s.writeAPIError(w, r, e)
}

// itemError is writeError for one batch item: the envelope and its status.
func (s *Server) itemError(r *http.Request, index int, err error) (int, *errorBody) {
	e := classify(err)
	if e == nil {
		s.log.ErrorContext(r.Context(), "batch item failed", "request_id", RequestIDFromContext(r.Context()),
			"index", index, "err", clean(err.Error()))
		e = internalError()
	}
	if e.retryAfter > 0 {
		e.details["retry_after_s"] = e.retryAfter // no per-item header to carry it
	}
	return e.status, e.body(RequestIDFromContext(r.Context()))
}

func (s *Server) writeAPIError(w http.ResponseWriter, r *http.Request, e *apiError) {
	id := RequestIDFromContext(r.Context())
	if id == "" {
		id = w.Header().Get("X-Request-ID")
	}
	if e.retryAfter > 0 {
		w.Header().Set("Retry-After", strconv.Itoa(e.retryAfter))
	}
	s.writeJSON(w, r, e.status, e.body(id))
}

// respBuf takes a buffer from respBufs.
func respBuf() *[]byte {
	if bp, ok := respBufs.Get().(*[]byte); ok {
		return bp
	}
	b := make([]byte, 0, 2048)
	return &b
}

// internalErrorBody is the body of 500 INTERNAL_ERROR for requestID, the
// answer when a response could not be encoded.
func internalErrorBody(requestID string) []byte {
	b, err := json.Marshal(internalError().body(requestID))
	if err != nil { // strings and an empty map: cannot happen
		return []byte(`{"code":"INTERNAL_ERROR","message":"an internal error occurred","details":{}}`)
	}
	return b
}

// respBufs holds the buffers task answers are encoded into; a task answer
// is usually well under 2 KiB.
var respBufs = sync.Pool{New: func() any { b := make([]byte, 0, 2048); return &b }}

// maxPooledResp bounds the buffers put back in respBufs, so that one large
// task does not pin its memory.
const maxPooledResp = 64 << 10

// writeJSON writes v as the whole response. A task answer (taskResponse or
// *dtqtype.TaskInfo) is encoded by its hand-written encoder into a pooled
// buffer, anything else by encoding/json; the bytes are the same either way.
func (s *Server) writeJSON(w http.ResponseWriter, r *http.Request, status int, v any) {
	var (
		b   []byte
		err error
		bp  *[]byte // the pooled buffer b lives in, if any
	)
	switch v := v.(type) {
	case taskResponse:
		bp = respBuf()
		b, err = v.AppendJSON((*bp)[:0])
	case *dtqtype.TaskInfo:
		bp = respBuf()
		b, err = v.AppendJSON((*bp)[:0])
	}
	if bp == nil || err != nil {
		// encoding/json also fails on a task the fast path refuses (a raw
		// field that is not JSON); let it decide and word the error.
		if bp != nil {
			respBufs.Put(bp)
			bp = nil
		}
		b, err = json.Marshal(v)
	}
	if err != nil {
		s.log.ErrorContext(r.Context(), "encode response", "request_id", RequestIDFromContext(r.Context()), "err", clean(err.Error()))
		status = http.StatusInternalServerError
		b = internalErrorBody(RequestIDFromContext(r.Context()))
	}
	b = append(b, '\n')
	h := w.Header()
	h.Set("Content-Type", "application/json")
	h.Set("Content-Length", strconv.Itoa(len(b)))
	h.Set("X-Content-Type-Options", "nosniff")
	w.WriteHeader(status)
	_, _ = w.Write(b)
	if bp != nil && cap(b) <= maxPooledResp {
		*bp = b[:0] // keep the grown buffer; Write does not retain it
		respBufs.Put(bp)
	}
}
