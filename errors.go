package dtq

import (
	"errors"
	"fmt"
	"reflect"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/dtq-io/dtq/internal/cursor"
	"github.com/dtq-io/dtq/internal/rdb"
)

// Sentinel errors. Match them with errors.Is; the typed errors below carry
// the details and unwrap to these.
var (
	// ErrInvalidTask: a submission failed validation (see *ValidationError).
	ErrInvalidTask = errors.New("dtq: invalid task")
	// ErrUnknownTaskType: the task type is not registered.
	ErrUnknownTaskType = errors.New("dtq: unknown task type")
	// ErrPayloadTooLarge: the payload exceeds the configured limit.
	ErrPayloadTooLarge = errors.New("dtq: payload too large")
	// ErrQueueFull: the queue holds MaxQueueDepth live tasks (see *QueueFullError).
	ErrQueueFull = errors.New("dtq: queue full")
	// ErrIdempotencyInProgress: the idempotency key belongs to a task that is
	// still being processed (see *IdempotencyConflictError).
	ErrIdempotencyInProgress = errors.New("dtq: idempotency key in progress")
	// ErrIdempotencyKeyMismatch: the idempotency key was used with a different
	// request (see *IdempotencyConflictError).
	ErrIdempotencyKeyMismatch = errors.New("dtq: idempotency key reused with a different request")
	// ErrTaskNotFound: no task has that id (or its retention passed).
	ErrTaskNotFound = errors.New("dtq: task not found")
	// ErrLeaseLost: a worker lost its lease on a task and may not finalize it.
	ErrLeaseLost = errors.New("dtq: lease lost")
	// ErrOperationInProgress: IdempotentOperation found the key's operation
	// running elsewhere; try again later.
	ErrOperationInProgress = errors.New("dtq: operation in progress")
	// ErrOperationLost: IdempotentOperation's claim lapsed while fn ran (its
	// renewals failed for longer than the lease) and another caller may have
	// taken the key. It is the cause of fn's cancelled context, and is
	// wrapped in the error returned when fn's result could not be stored.
	ErrOperationLost = errors.New("dtq: operation claim lost")
	// ErrNotReplicated: a write ran on the Redis master but fewer replicas
	// than ReplicaAcks acknowledged it in time; it may be lost in a
	// failover. Sending it again (with the same idempotency key, for a
	// submission) is safe.
	ErrNotReplicated = rdb.ErrNotReplicated
	// ErrOutcomeUnknown: a submission was sent to Redis but no answer came
	// back, even after it was sent again and settled (Redis unreachable
	// for longer than the client waits): the task may or may not exist (see
	// *OutcomeUnknownError). Submitting again with the same idempotency key
	// is safe; without one, look the task id up before submitting again.
	ErrOutcomeUnknown = errors.New("dtq: submission outcome unknown")
)

// OutcomeUnknownError is returned when a submission's outcome could not be
// learnt from Redis: the task named TaskID may or may not have been created.
type OutcomeUnknownError struct {
	Queue  string
	TaskID string // the id the task has if it was created
	Key    string // its idempotency key, "" = none
	Err    error  // the last error from Redis
}

// Error names the task and what to do.
func (e *OutcomeUnknownError) Error() string {
	return fmt.Sprintf("dtq: the outcome of submitting task %s to queue %q is unknown (it may or may not exist): %v", e.TaskID, e.Queue, e.Err)
}

// Unwrap returns ErrOutcomeUnknown and the Redis error.
func (e *OutcomeUnknownError) Unwrap() []error { return []error{ErrOutcomeUnknown, e.Err} }

// ValidationError reports one invalid submission field. It matches
// ErrInvalidTask, or ErrUnknownTaskType or ErrPayloadTooLarge for those
// refusals.
type ValidationError struct {
	Field   string // JSON name of the field, e.g. "priority"
	Message string // what is wrong and what is accepted
	kind    error  // ErrUnknownTaskType or ErrPayloadTooLarge; nil: ErrInvalidTask
}

// Error describes the field and what is wrong with it.
func (e *ValidationError) Error() string { return e.Field + ": " + e.Message }

// Unwrap returns the sentinel the error belongs to.
func (e *ValidationError) Unwrap() error {
	if e.kind == nil {
		return ErrInvalidTask
	}
	return e.kind
}

func invalid(field, format string, args ...any) *ValidationError {
	return &ValidationError{Field: field, Message: fmt.Sprintf(format, args...)}
}

// QueueFullError is returned when a queue is at its depth limit.
type QueueFullError struct {
	Queue      string
	Depth      int64
	Limit      int64
	RetryAfter time.Duration // a hint computed from the queue's recent drain rate
	// Partition is the partition that is full, for a partitioned queue,
	// whose bound applies per partition: Depth and Limit are then the
	// partition's (docs/partitions.md).
	Partition *int
}

// Error names the queue (and partition), its depth and its limit.
func (e *QueueFullError) Error() string {
	if e.Partition != nil {
		return fmt.Sprintf("dtq: queue %q is full in partition %d (%d of its %d tasks: the queue's bound shared by its partitions)",
			e.Queue, *e.Partition, e.Depth, e.Limit)
	}
	return fmt.Sprintf("dtq: queue %q is full (%d of %d tasks)", e.Queue, e.Depth, e.Limit)
}

// Unwrap returns ErrQueueFull.
func (e *QueueFullError) Unwrap() error { return ErrQueueFull }

// ErrTooManyWorkers is returned when a new worker id would take the deployment's worker
// records past DeploymentConfig.MaxWorkers, or an API key's past
// MaxWorkersPerKey (see *TooManyWorkersError).
var ErrTooManyWorkers = errors.New("dtq: too many workers")

// TooManyWorkersError is returned when a new worker id is refused a
// heartbeat record because a bound is reached. Workers already recorded are
// never refused.
type TooManyWorkersError struct {
	Scope      string        // "total" (MaxWorkers) or "key" (MaxWorkersPerKey)
	Count      int64         // ids recorded in that scope
	Limit      int64         // the bound
	RetryAfter time.Duration // until the oldest record may be evicted to make room
}

// Error names the bound reached.
func (e *TooManyWorkersError) Error() string {
	if e.Scope == "key" {
		return fmt.Sprintf("dtq: this API key has %d of its %d worker records (DTQ_MAX_WORKERS_PER_KEY); reuse a worker id", e.Count, e.Limit)
	}
	return fmt.Sprintf("dtq: %d of %d worker records are in use (DTQ_MAX_WORKERS); reuse a worker id", e.Count, e.Limit)
}

// Unwrap returns ErrTooManyWorkers.
func (e *TooManyWorkersError) Unwrap() error { return ErrTooManyWorkers }

// tooManyWorkers converts the storage layer's bound error to the public one.
func tooManyWorkers(err error) error {
	if tm, ok := errors.AsType[*rdb.TooManyWorkersError](err); ok {
		return &TooManyWorkersError{Scope: tm.Scope, Count: tm.Count, Limit: tm.Limit, RetryAfter: tm.RetryAfter}
	}
	return err
}

// IdempotencyConflictError is returned when an idempotency key belongs to a
// task that is still in progress, or was used with a different request.
type IdempotencyConflictError struct {
	Queue  string
	Key    string
	TaskID string // the task the key belongs to
	err    error
}

// Error names the key and the task it belongs to.
func (e *IdempotencyConflictError) Error() string {
	return fmt.Sprintf("%v: key %q belongs to task %s", e.err, e.Key, e.TaskID)
}

// Unwrap returns ErrIdempotencyInProgress or ErrIdempotencyKeyMismatch.
func (e *IdempotencyConflictError) Unwrap() error { return e.err }

// Admin and read errors.
var (
	// ErrTaskTerminal: the task already finished (see *TaskStateError).
	ErrTaskTerminal = errors.New("dtq: task is in a terminal state")
	// ErrTaskConflict: the task's state does not allow the action (see
	// *TaskStateError).
	ErrTaskConflict = errors.New("dtq: task state does not allow this action")
	// ErrQueueNotFound: no task was ever submitted to the queue.
	ErrQueueNotFound = errors.New("dtq: queue not found")
	// ErrQueueNotEmpty means a queue still holds tasks, so it cannot be
	// deleted.
	ErrQueueNotEmpty = errors.New("dtq: queue not empty")
	// ErrPartitionsConflict: a queue exists with another number of
	// partitions than asked (see *PartitionsConflictError).
	ErrPartitionsConflict = errors.New("dtq: queue has other partitions")
	// ErrWorkerNotFound: no worker with that id heartbeated in the last 24h.
	ErrWorkerNotFound = errors.New("dtq: worker not found")
	// ErrDLQEntryNotFound: the task is not in its queue's dead-letter queue.
	ErrDLQEntryNotFound = errors.New("dtq: dead-letter entry not found")
	// ErrInvalidCursor: a cursor was not one the list (or bulk action) it
	// was given to returned: forged, altered, from an older version of dtq,
	// or from another list. Start again without one.
	ErrInvalidCursor = cursor.ErrInvalid
)

// TaskStateError reports an action refused because of the task's status.
type TaskStateError struct {
	TaskID string
	Status string
	err    error
}

// Error names the task and its status.
func (e *TaskStateError) Error() string {
	return fmt.Sprintf("%v: task %s is %s", e.err, e.TaskID, e.Status)
}

// Unwrap returns ErrTaskTerminal or ErrTaskConflict.
func (e *TaskStateError) Unwrap() error { return e.err }

// errorClass names the kind of a handler error for error_class: an explicit
// ErrorClass() method wins; otherwise the error's type name, with the
// standard library's anonymous error types shown as "Error".
func errorClass(err error) string {
	var c interface{ ErrorClass() string }
	if errors.As(err, &c) {
		return c.ErrorClass()
	}
	for {
		// Only dtq's own outermost wrappers (Permanent, RetryAfter) are
		// peeled, to name the handler's error: errors.As would reach into
		// the handler's own chain and name a cause instead.
		switch e := err.(type) { //nolint:errorlint // see above
		case *permanentError:
			err = e.err
			continue
		case *retryAfterError:
			err = e.err
			continue
		}
		break
	}
	t := reflect.TypeOf(err)
	for t != nil && t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	if t == nil || t.Name() == "" || !unicode.IsUpper(rune(t.Name()[0])) {
		return "Error"
	}
	return t.Name()
}

// maxErrorMessage is the longest error_message kept, in characters.
const maxErrorMessage = 500

// maxLoggedErrorMessage is the longest handler error message a worker's
// log line carries, in characters; the task keeps up to maxErrorMessage.
const maxLoggedErrorMessage = 200

// logErrorMessage is a handler's error message cut for a log line. The
// message is the handler's error text only: payloads are never logged.
func logErrorMessage(msg string) string {
	if utf8.RuneCountInString(msg) <= maxLoggedErrorMessage {
		return msg
	}
	return oneLine(msg, maxLoggedErrorMessage-1) + "…"
}

// oneLine makes s safe to store and show: control characters become spaces
// and it is cut to n characters (never inside a UTF-8 sequence).
func oneLine(s string, n int) string {
	var b strings.Builder
	count := 0
	for _, r := range s {
		if count == n {
			break
		}
		if r == utf8.RuneError || unicode.IsControl(r) {
			r = ' '
		}
		b.WriteRune(r)
		count++
	}
	return b.String()
}
