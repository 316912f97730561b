// Package dtqtest helps test dtq handlers without Redis or a worker: build a
// task with NewTask, run a handler on it with Run, and look at the result or
// at how the error would steer the task (IsPermanent).
//
// Run calls the handler the way a worker does — a panic becomes an error, the
// result is encoded as it would be stored — but it does not retry, does not
// time out on its own beyond the task's Deadline, and does not record
// anything. Handlers that use dtq.IdempotentOperation still need Redis.
package dtqtest

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/dtq-io/dtq"
)

// DefaultTimeout is the attempt timeout NewTask gives a task: its Deadline
// is this long after NewTask returns, as for a task submitted with the
// default timeout.
const DefaultTimeout = 30 * time.Second

// Option changes a task built by NewTask.
type Option func(*dtq.Task)

// Attempt sets the attempt number (default 1).
func Attempt(n int) Option { return func(t *dtq.Task) { t.Attempt = n } }

// MaxAttempts sets the attempt limit (default 5).
func MaxAttempts(n int) Option { return func(t *dtq.Task) { t.MaxAttempts = n } }

// ID sets the task id (default a random 32-character hex id).
func ID(id string) Option { return func(t *dtq.Task) { t.ID = id } }

// Queue sets the queue (default "default").
func Queue(q string) Option { return func(t *dtq.Task) { t.Queue = q } }

// IdempotencyKey sets the task's submission idempotency key (default none).
func IdempotencyKey(k string) Option { return func(t *dtq.Task) { t.IdempotencyKey = k } }

// Deadline sets when the attempt times out (default DefaultTimeout from
// now); Run cancels the handler's context then. The zero time means none.
func Deadline(d time.Time) Option { return func(t *dtq.Task) { t.Deadline = d } }

// NewTask returns a task of taskType as a worker would hand it to a handler.
// payload is encoded to JSON: a json.RawMessage or []byte is used as is, nil
// or JSON null is {}. NewTask panics if payload cannot be encoded or is not valid JSON,
// like net/http/httptest.NewRequest panics on a bad request: it is a mistake
// in the test.
func NewTask(taskType string, payload any, opts ...Option) *dtq.Task {
	body, err := encodeJSON(payload)
	if err != nil {
		panic(fmt.Sprintf("dtqtest: NewTask payload: %v", err))
	}
	if body == nil || string(body) == "null" {
		body = json.RawMessage(`{}`) // as a submission stores it
	}
	now := time.Now()
	var b [16]byte
	_, _ = rand.Read(b[:])
	t := &dtq.Task{
		ID:          hex.EncodeToString(b[:]),
		Queue:       dtq.DefaultQueue,
		Type:        taskType,
		Attempt:     1,
		MaxAttempts: 5,
		Payload:     body,
		Metadata:    json.RawMessage(`{}`),
		CreatedAt:   now.UTC(),
		Deadline:    now.Add(DefaultTimeout),
		WorkerID:    "dtqtest",
	}
	for _, o := range opts {
		o(t)
	}
	return t
}

// Run calls h with t and returns the result encoded as a worker would store
// it (nil when the handler returned nil) or the handler's error. A panic in
// the handler is returned as a permanent error, as a worker treats it. ctx
// is cancelled at t.Deadline when that is set.
func Run(ctx context.Context, h dtq.Handler, t *dtq.Task) (result json.RawMessage, err error) {
	if h == nil || t == nil {
		return nil, errors.New("dtqtest: Run needs a handler and a task")
	}
	if !t.Deadline.IsZero() {
		var cancel context.CancelFunc
		ctx, cancel = context.WithDeadline(ctx, t.Deadline)
		defer cancel()
	}
	res, err := call(ctx, h, t)
	if err != nil {
		return nil, err
	}
	body, err := encodeJSON(res)
	if err != nil {
		return nil, fmt.Errorf("dtqtest: handler result: %w", err)
	}
	return body, nil
}

func call(ctx context.Context, h dtq.Handler, t *dtq.Task) (res any, err error) {
	defer func() {
		if p := recover(); p != nil {
			res, err = nil, dtq.Permanent(fmt.Errorf("panic: %v", p))
		}
	}()
	return h.ProcessTask(ctx, t)
}

// encodeJSON encodes v; nil stays nil, and json.RawMessage and []byte must
// already hold valid JSON (as a worker requires of results).
func encodeJSON(v any) (json.RawMessage, error) {
	switch b := v.(type) {
	case nil:
		return nil, nil
	case json.RawMessage:
		return checkJSON(b)
	case []byte:
		return checkJSON(b)
	}
	return json.Marshal(v)
}

func checkJSON(b []byte) (json.RawMessage, error) {
	if !json.Valid(b) {
		return nil, errors.New("not valid JSON")
	}
	return json.RawMessage(b), nil
}

// IsPermanent reports whether err would end the task at once instead of
// being retried: it was marked with dtq.Permanent (directly or wrapped),
// which Run also does for a panic and dtq.Typed for a payload that does not
// decode.
func IsPermanent(err error) bool { return dtq.IsPermanent(err) }
