// Package examples holds the example task handlers that `dtq worker` and
// `dtq dev` register. They double as a tour of the handler API: typed
// payloads, results, retryable and permanent errors, honouring the context,
// and IdempotentOperation for side effects that must not repeat.
//
// Payload fields shown in braces are required; a payload that does not
// decode, or holds an out-of-range value, fails permanently (no retry).
package examples

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"strconv"
	"time"
	"unicode"

	"github.com/redis/go-redis/v9"

	"github.com/dtq-io/dtq"
	"github.com/dtq-io/dtq/dtqtype"
)

// Types lists the example task types in the order Register adds them.
var Types = []string{"echo", "sleep", "fibonacci", "flaky", "always_fail", "counter_task", "send_receipt"}

// keyTTL bounds the life of the Redis keys the examples write, so that a demo
// leaves nothing behind for good.
const keyTTL = 7 * 24 * time.Hour

// receiptTTL is how long send_receipt remembers that a receipt was sent.
const receiptTTL = 24 * time.Hour

// maxSleep is the longest sleep accepted: the longest task timeout.
const maxSleep = dtq.MaxTimeout

// Register adds the example handlers to mux. counter_task and send_receipt
// keep their own keys in rdb, d's Redis, under d's key prefix; neither may
// be nil. Register panics if one of Types is already registered.
func Register(mux *dtq.ServeMux, d *dtq.Deployment, rdb redis.UniversalClient) {
	if d == nil || rdb == nil {
		panic("examples: Register needs a Deployment and its Redis client")
	}
	e := &handlers{d: d, rdb: rdb, prefix: d.KeyPrefix()}
	mux.HandleFunc("echo", Echo)
	mux.Handle("sleep", dtq.Typed(Sleep))
	mux.Handle("fibonacci", dtq.Typed(Fibonacci))
	mux.Handle("flaky", dtq.Typed(Flaky))
	mux.HandleFunc("always_fail", AlwaysFail)
	mux.Handle("counter_task", dtq.Typed(e.counter))
	mux.Handle("send_receipt", dtq.Typed(e.sendReceipt))
}

type handlers struct {
	d      *dtq.Deployment
	rdb    redis.UniversalClient
	prefix string
}

// exampleError carries the error_class the examples report.
type exampleError struct {
	class string
	msg   string
	err   error
}

func (e *exampleError) Error() string {
	if e.err != nil {
		return e.msg + ": " + e.err.Error()
	}
	return e.msg
}
func (e *exampleError) Unwrap() error      { return e.err }
func (e *exampleError) ErrorClass() string { return e.class }

// invalidPayload is a permanent failure: the payload decoded but its values
// are unusable, and retrying cannot change that.
func invalidPayload(format string, args ...any) error {
	return dtq.Permanent(&exampleError{class: "InvalidPayload", msg: fmt.Sprintf(format, args...)})
}

// Echo handles "echo": payload any object; result the payload unchanged.
func Echo(_ context.Context, t *dtq.Task) (any, error) {
	if len(t.Payload) == 0 {
		return json.RawMessage(`{}`), nil
	}
	return t.Payload, nil
}

// SleepPayload is the payload of "sleep".
type SleepPayload struct {
	Seconds *float64 `json:"seconds"` // 0..3600, fractions allowed, within the task's timeout
}

// SleepResult is the result of "sleep".
type SleepResult struct {
	Seconds float64 `json:"seconds"`
}

// Sleep handles "sleep": payload {seconds}; result {seconds}. A sleep that
// cannot end before the attempt's timeout (30 s unless the submission sets
// timeout_ms) fails at once, permanently, saying which timeout to set,
// instead of timing out and being retried. It returns early with the
// context's error (wrapping its cause, e.g. a cancel request) when the
// context ends first.
func Sleep(ctx context.Context, t *dtq.Task, p SleepPayload) (any, error) {
	if p.Seconds == nil {
		return nil, invalidPayload("seconds is required")
	}
	s := *p.Seconds
	if math.IsNaN(s) || s < 0 || s > maxSleep.Seconds() {
		return nil, invalidPayload("seconds must be between 0 and %v", maxSleep.Seconds())
	}
	d := time.Duration(s * float64(time.Second))
	if !t.Deadline.IsZero() && time.Now().Add(d).After(t.Deadline) {
		return nil, invalidPayload("a sleep of %v cannot end within this attempt's timeout (it ends at %s); submit with timeout_ms of at least %d",
			s, t.Deadline.UTC().Format(time.RFC3339), (d + time.Second).Milliseconds())
	}
	// It reports its progress each second and logs a line as it starts
	// and ends (docs/progress.md); outside a worker both do nothing.
	log := dtq.Logger(ctx)
	log.Info("sleeping", "seconds", s)
	began := time.Now()
	timer := time.NewTimer(d)
	defer timer.Stop()
	tick := time.NewTicker(time.Second)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			log.Warn("sleep interrupted", "after_seconds", time.Since(began).Seconds())
			return nil, fmt.Errorf("sleep interrupted: %w", contextError(ctx))
		case <-tick.C:
			_ = dtq.Progress(ctx, math.Min(100, math.Round(float64(time.Since(began))/float64(d)*100)))
		case <-timer.C:
			_ = dtq.Progress(ctx, 100)
			log.Info("slept", "seconds", s)
			return SleepResult{Seconds: s}, nil
		}
	}
}

// contextError is ctx's error, also wrapping its cause when the cause says
// more (dtq cancels handler contexts with a cause naming the reason), so
// that errors.Is matches both.
func contextError(ctx context.Context) error {
	err, cause := ctx.Err(), context.Cause(ctx)
	if cause == nil || errors.Is(cause, err) {
		return err
	}
	return fmt.Errorf("%w: %w", err, cause)
}

// FibonacciPayload is the payload of "fibonacci".
type FibonacciPayload struct {
	N *int `json:"n"` // 0..90
}

// FibonacciResult is the result of "fibonacci".
type FibonacciResult struct {
	N   int    `json:"n"`
	Fib uint64 `json:"fib"`
}

// maxFibonacci is the largest n accepted; fib(90) still fits comfortably in
// 63 bits.
const maxFibonacci = 90

// Fibonacci handles "fibonacci": payload {n} with n in 0..90; result {n, fib}.
// Any other n fails permanently.
func Fibonacci(_ context.Context, _ *dtq.Task, p FibonacciPayload) (any, error) {
	if p.N == nil {
		return nil, invalidPayload("n is required")
	}
	n := *p.N
	if n < 0 || n > maxFibonacci {
		return nil, invalidPayload("n must be between 0 and %d, got %d", maxFibonacci, n)
	}
	var a, b uint64 = 0, 1
	for range n {
		a, b = b, a+b
	}
	return FibonacciResult{N: n, Fib: a}, nil
}

// FlakyPayload is the payload of "flaky".
type FlakyPayload struct {
	FailTimes *int `json:"fail_times"` // >= 0
}

// FlakyResult is the result of "flaky".
type FlakyResult struct {
	Attempt   int `json:"attempt"`
	FailTimes int `json:"fail_times"`
}

// Flaky handles "flaky": payload {fail_times}; it fails retryably (error
// class FlakyFailure) while the attempt is at most fail_times, then succeeds
// with {attempt, fail_times}. With max_attempts <= fail_times it ends
// dead-lettered.
func Flaky(_ context.Context, t *dtq.Task, p FlakyPayload) (any, error) {
	if p.FailTimes == nil {
		return nil, invalidPayload("fail_times is required")
	}
	if *p.FailTimes < 0 {
		return nil, invalidPayload("fail_times must not be negative")
	}
	if t.Attempt <= *p.FailTimes {
		return nil, &exampleError{class: "FlakyFailure", msg: fmt.Sprintf("planned failure %d of %d", t.Attempt, *p.FailTimes)}
	}
	return FlakyResult{Attempt: t.Attempt, FailTimes: *p.FailTimes}, nil
}

// AlwaysFail handles "always_fail": payload ignored; it always fails
// retryably (error class AlwaysFail), so the task ends dead-lettered once
// its attempts run out.
func AlwaysFail(_ context.Context, t *dtq.Task) (any, error) {
	return nil, &exampleError{class: "AlwaysFail", msg: fmt.Sprintf("always_fail failed on attempt %d as designed", t.Attempt)}
}

// CounterPayload is the payload of "counter_task".
type CounterPayload struct {
	Counter string `json:"counter"` // 1..128 printable characters
}

// CounterResult is the result of "counter_task".
type CounterResult struct {
	Counter string `json:"counter"`
	Value   int64  `json:"value"`
}

// counter handles "counter_task": payload {counter}; result {counter, value}.
// It increments <prefix>:examples:counter:<counter> with a plain INCR. That
// is deliberately not idempotent: a task that runs twice (a retry after a
// lost lease) counts twice — delivery is at-least-once.
func (e *handlers) counter(ctx context.Context, _ *dtq.Task, p CounterPayload) (any, error) {
	if err := checkName("counter", p.Counter); err != nil {
		return nil, err
	}
	key := e.prefix + ":examples:counter:" + p.Counter
	v, err := e.incr(ctx, key)
	if err != nil {
		return nil, fmt.Errorf("increment counter %q: %w", p.Counter, err)
	}
	return CounterResult{Counter: p.Counter, Value: v}, nil
}

// incr increments key and refreshes its TTL in one round trip.
func (e *handlers) incr(ctx context.Context, key string) (int64, error) {
	var n *redis.IntCmd
	_, err := e.rdb.TxPipelined(ctx, func(p redis.Pipeliner) error {
		n = p.Incr(ctx, key)
		p.Expire(ctx, key, keyTTL)
		return nil
	})
	if err != nil {
		return 0, err
	}
	return n.Val(), nil
}

func checkName(field, s string) error {
	if s == "" || len(s) > 128 {
		return invalidPayload("%s must be 1..128 characters", field)
	}
	for _, r := range s {
		if !unicode.IsPrint(r) {
			return invalidPayload("%s must be printable", field)
		}
	}
	return nil
}

// ReceiptPayload is the payload of "send_receipt". OrderID is a JSON string
// or integer.
type ReceiptPayload struct {
	OrderID json.RawMessage `json:"order_id"`
}

// ReceiptResult is the result of "send_receipt": SentAt on the run that sent
// the receipt, Deduped on a later run for the same order.
type ReceiptResult struct {
	OrderID json.RawMessage `json:"order_id"`
	SentAt  string          `json:"sent_at,omitempty"`
	Deduped bool            `json:"deduped,omitempty"`
}

// sendReceipt handles "send_receipt": payload {order_id}; result
// {order_id, sent_at} when it "sends" the receipt, {order_id, deduped: true}
// when a receipt for the order was already sent in the last 24 hours. The
// send (an INCR of <prefix>:examples:receipts:<order_id>) runs inside
// IdempotentOperation keyed receipt:<order_id>, so tasks for one order send
// at most once per window even when they run more than once. When another
// task is sending the same receipt right now it fails retryably.
func (e *handlers) sendReceipt(ctx context.Context, _ *dtq.Task, p ReceiptPayload) (any, error) {
	id, err := orderKey(p.OrderID)
	if err != nil {
		return nil, err
	}
	executed, res, err := dtq.IdempotentOperation(ctx, e.d, "receipt:"+id, receiptTTL,
		func(ctx context.Context) (ReceiptResult, error) {
			if _, err := e.incr(ctx, e.prefix+":examples:receipts:"+id); err != nil {
				return ReceiptResult{}, fmt.Errorf("send receipt: %w", err)
			}
			return ReceiptResult{OrderID: p.OrderID, SentAt: time.Now().UTC().Format(dtqtype.TimeLayout)}, nil
		})
	switch {
	case errors.Is(err, dtq.ErrOperationInProgress):
		return nil, fmt.Errorf("receipt for order %s is being sent by another task: %w", id, err)
	case err != nil:
		return nil, err
	case !executed:
		return ReceiptResult{OrderID: p.OrderID, Deduped: true}, nil
	}
	return res, nil
}

// orderKey returns the order id as it appears in keys: a string as is, an
// integer in decimal.
func orderKey(raw json.RawMessage) (string, error) {
	if len(raw) == 0 || string(raw) == "null" {
		return "", invalidPayload("order_id is required")
	}
	var s string
	if raw[0] == '"' {
		if err := json.Unmarshal(raw, &s); err != nil {
			return "", invalidPayload("order_id is not a valid string")
		}
	} else {
		n, err := strconv.ParseInt(string(raw), 10, 64)
		if err != nil {
			return "", invalidPayload("order_id must be a string or an integer")
		}
		s = strconv.FormatInt(n, 10)
	}
	if err := checkName("order_id", s); err != nil {
		return "", err
	}
	return s, nil
}
