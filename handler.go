package dtq

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"sort"
	"sync"
	"time"
)

// Task is a task as its handler sees it. Handlers must not keep it after
// they return.
type Task struct {
	ID             string
	Queue          string
	Type           string
	Attempt        int // 1 for the first run
	MaxAttempts    int
	IdempotencyKey string // "" when the task has none
	Payload        json.RawMessage
	Metadata       json.RawMessage
	CreatedAt      time.Time
	Deadline       time.Time // when this attempt times out
	WorkerID       string
	// WorkflowID and Ref name the workflow node the task is; "" for a task
	// submitted on its own. Deps has its deps' outcomes.
	WorkflowID, Ref string

	deps json.RawMessage // the deps' outcomes as claimed
}

// Handler executes tasks. ProcessTask returns a result (any value that
// marshals to JSON, or nil) or an error. Errors are retried with backoff
// unless wrapped with Permanent; RetryAfter sets the delay. The context is
// cancelled at the task's timeout, on a cancel request, when the worker loses
// the task's lease and at shutdown.
type Handler interface {
	ProcessTask(ctx context.Context, t *Task) (any, error)
}

// HandlerFunc adapts a function to Handler.
type HandlerFunc func(ctx context.Context, t *Task) (any, error)

// ProcessTask calls f.
func (f HandlerFunc) ProcessTask(ctx context.Context, t *Task) (any, error) { return f(ctx, t) }

// Middleware wraps a Handler, e.g. for logging or tracing.
type Middleware func(Handler) Handler

// ServeMux routes tasks to handlers by task type. It is safe for concurrent
// use; register handlers before the worker starts.
type ServeMux struct {
	mu         sync.RWMutex
	handlers   map[string]Handler
	middleware []Middleware
}

// NewServeMux returns an empty mux.
func NewServeMux() *ServeMux { return &ServeMux{handlers: map[string]Handler{}} }

// Handle registers h for taskType. It panics on an empty or duplicate type,
// like net/http.
func (m *ServeMux) Handle(taskType string, h Handler) {
	if taskType == "" || h == nil {
		panic("dtq: Handle needs a task type and a handler")
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if _, dup := m.handlers[taskType]; dup {
		panic("dtq: handler for " + taskType + " registered twice")
	}
	m.handlers[taskType] = h
}

// HandleFunc registers f for taskType.
func (m *ServeMux) HandleFunc(taskType string, f func(ctx context.Context, t *Task) (any, error)) {
	m.Handle(taskType, HandlerFunc(f))
}

// Use appends middleware applied to every handler, outermost first.
func (m *ServeMux) Use(mws ...Middleware) {
	m.mu.Lock()
	m.middleware = append(m.middleware, mws...)
	m.mu.Unlock()
}

// Types lists the registered task types, sorted.
func (m *ServeMux) Types() []string {
	m.mu.RLock()
	defer m.mu.RUnlock()
	out := make([]string, 0, len(m.handlers))
	for t := range m.handlers {
		out = append(out, t)
	}
	sort.Strings(out)
	return out
}

// Handler returns the handler for taskType wrapped in the middleware, or nil.
func (m *ServeMux) Handler(taskType string) Handler {
	m.mu.RLock()
	defer m.mu.RUnlock()
	h, ok := m.handlers[taskType]
	if !ok {
		return nil
	}
	for _, v := range slices.Backward(m.middleware) {
		h = v(h)
	}
	return h
}

// ProcessTask dispatches t to its handler. An unregistered type is an error
// of class UnknownTaskType, retried with backoff (a rolling deploy may not
// have the handler everywhere yet) and dead-lettered when attempts run out.
func (m *ServeMux) ProcessTask(ctx context.Context, t *Task) (any, error) {
	h := m.Handler(t.Type)
	if h == nil {
		return nil, &classedError{class: "UnknownTaskType", err: fmt.Errorf("no handler registered for task type %q", t.Type)}
	}
	return h.ProcessTask(ctx, t)
}

// Typed returns a Handler that decodes the payload into a T before calling
// fn. A payload that does not decode is a permanent failure (error class
// PayloadDecode): retrying cannot fix it.
func Typed[T any](fn func(ctx context.Context, t *Task, payload T) (any, error)) Handler {
	return HandlerFunc(func(ctx context.Context, t *Task) (any, error) {
		var p T
		if err := json.Unmarshal(t.Payload, &p); err != nil {
			return nil, Permanent(&classedError{class: "PayloadDecode", err: fmt.Errorf("decode payload: %w", err)})
		}
		return fn(ctx, t, p)
	})
}

// Permanent marks err as not worth retrying: the task is dead-lettered (or
// failed when the DLQ is off) at once.
func Permanent(err error) error {
	if err == nil {
		return nil
	}
	return &permanentError{err: err}
}

type permanentError struct{ err error }

func (e *permanentError) Error() string { return e.err.Error() }
func (e *permanentError) Unwrap() error { return e.err }

// IsPermanent reports whether err was marked with Permanent.
func IsPermanent(err error) bool {
	var p *permanentError
	return errors.As(err, &p)
}

// RetryAfter asks for the next attempt after d instead of the backoff
// schedule (still bounded by max attempts).
func RetryAfter(d time.Duration, err error) error {
	if err == nil {
		err = errors.New("retry requested")
	}
	return &retryAfterError{d: d, err: err}
}

type retryAfterError struct {
	d   time.Duration
	err error
}

func (e *retryAfterError) Error() string { return e.err.Error() }
func (e *retryAfterError) Unwrap() error { return e.err }

// classedError carries an explicit error_class.
type classedError struct {
	class string
	err   error
}

func (e *classedError) Error() string      { return e.err.Error() }
func (e *classedError) Unwrap() error      { return e.err }
func (e *classedError) ErrorClass() string { return e.class }

// RetryDelay reports the delay requested with RetryAfter anywhere in err's
// chain.
func RetryDelay(err error) (time.Duration, bool) {
	if ra, ok := errors.AsType[*retryAfterError](err); ok {
		return ra.d, true
	}
	return 0, false
}

// ErrorClass returns the error_class a worker records for err: an explicit
// ErrorClass() string method wins, else the error's type name ("Error" for
// the standard library's anonymous errors).
func ErrorClass(err error) string { return errorClass(err) }
