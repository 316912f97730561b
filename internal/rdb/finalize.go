package rdb

import (
	"context"
	"errors"
	"fmt"
	"time"
)

// ErrLeaseLost is returned by a finalize whose fence refused it: the task is
// no longer running under this worker and attempt.
var ErrLeaseLost = errors.New("lease lost")

// ErrAttemptsExhausted is returned by FinishRetry with
// FinishArgs.CheckAttempts when the task has no attempts left: nothing was
// written, and the caller finalizes with FinishDead instead.
var ErrAttemptsExhausted = errors.New("no attempts left")

// ErrCancelWon is returned by FinishRetry and FinishDead when the task had
// a cancel request: it ended cancelled instead (a cancel wins over a retry).
var ErrCancelWon = errors.New("cancel requested: task ended cancelled")

// FinishArgs identify the attempt a finalize applies to.
type FinishArgs struct {
	Queue   string
	ID      string
	Attempt int
	// Priority names the band stream passed as the script's own; the
	// finalize acks the entry in the band the task hash records, so a
	// caller that does not know it (a remote worker) may pass 0.
	Priority int
	Now      time.Time
	// CheckAttempts makes FinishRetry look up the task's max_attempts
	// itself and answer ErrAttemptsExhausted, writing nothing, when none
	// are left: for callers that do not know the task's limit.
	CheckAttempts bool
}

func fenced(v string, err error) error {
	if err != nil {
		return err
	}
	switch v {
	case "ok":
		return nil
	case "lease_lost":
		return ErrLeaseLost
	case "cancelled":
		return ErrCancelWon
	case "exhausted":
		return ErrAttemptsExhausted
	}
	return fmt.Errorf("rdb: unexpected finalize reply %q", v)
}

// Success is one attempt to finalize as succeeded.
type Success struct {
	ID        string
	Attempt   int
	Result    []byte // JSON, nil = none
	Truncated bool   // the result was too large to keep
}

// FinishSucceeded finalizes several succeeded attempts of one queue in one
// script call. It returns, per task, nil or ErrLeaseLost. A task whose
// success this worker already recorded (a call sent again after its reply
// was lost) answers nil.
func (r *RDB) FinishSucceeded(ctx context.Context, queue string, s *WorkerSettings, now time.Time, tasks []Success) ([]error, error) {
	k := r.keys
	l := r.limitKeys(queue)
	keyItems := make([]finishSucceededTaskKeysItem, len(tasks))
	argItems := make([]finishSucceededTasksItem, len(tasks))
	for i, t := range tasks {
		keyItems[i] = finishSucceededTaskKeysItem{Task: k.Task(queue, t.ID), Result: k.Result(queue, t.ID)}
		argItems[i] = finishSucceededTasksItem{ID: t.ID, Attempt: t.Attempt, Result: t.Result, Truncated: boolArg(t.Truncated)}
	}
	v, err := r.callFinishSucceeded(ctx, &finishSucceededKeys{
		Lease: k.Lease(queue), Events: k.Events(queue), Depth: k.Depth(queue), Stats: k.Stats(queue, minuteOf(now)),
		Bands: r.bandStreams(queue), KeyRunning: l.keyRunning, Held: l.held, Limited: l.limited, Wake: l.wake,
		Retained: k.Retained(queue), TaskKeys: keyItems, Outbox: k.WorkflowOutbox(queue), KeyFreed: l.freed,
	}, &finishSucceededArgs{
		Now: now.UnixMilli(), WorkerID: s.WorkerID, Group: Group, IdemPrefix: k.IdempotencyPrefix(queue),
		EventsMaxLen: s.EventsMaxLen, SucceededRetS: seconds(s.SucceededRetention), ResultRetS: seconds(s.ResultRetention),
		Count: len(tasks), KeyWaitPrefix: k.KeyWaitPrefix(queue), TaskPrefix: k.TaskPrefix(queue), Claim: s.Claim,
		Tasks: argItems,
	})
	if err != nil {
		return nil, err
	}
	if len(v) != len(tasks) {
		return nil, fmt.Errorf("rdb: succeed returned %d codes for %d tasks", len(v), len(tasks))
	}
	out := make([]error, len(v))
	for i, c := range v {
		if c == 0 {
			out[i] = ErrLeaseLost
		}
	}
	return out, nil
}

// The finalizers below answer nil, ErrLeaseLost, or (FinishRetry,
// FinishDead) ErrCancelWon. Each is idempotent: sent again after a lost
// reply, it answers what its first run did.

// FinishRetry schedules another attempt after delay. With
// a.CheckAttempts it answers ErrAttemptsExhausted when none are left.
func (r *RDB) FinishRetry(ctx context.Context, a *FinishArgs, s *WorkerSettings, delay time.Duration, class, msg string) error {
	k, q := r.keys, a.Queue
	l := r.limitKeys(q)
	return fenced(r.callFinishRetry(ctx, &finishRetryKeys{
		Task: k.Task(q, a.ID), Lease: k.Lease(q), Events: k.Events(q), Band: k.Stream(q, a.Priority), Depth: k.Depth(q),
		Stats: k.Stats(q, minuteOf(a.Now)), Schedule: k.Schedule(q), Expiry: k.Expiry(q), KeyRunning: l.keyRunning,
		Held: l.held, Limited: l.limited, Wake: l.wake, Bands: r.bandStreams(q), Retained: k.Retained(q),
		Outbox: k.WorkflowOutbox(q), KeyFreed: l.freed,
	}, &finishRetryArgs{
		Now: a.Now.UnixMilli(), ID: a.ID, Attempt: a.Attempt, WorkerID: s.WorkerID, Group: Group,
		IdemPrefix: k.IdempotencyPrefix(q), EventsMaxLen: s.EventsMaxLen, FailedRetS: seconds(s.FailedRetention),
		AttemptsCap: AttemptsCap, DelayMS: delay.Milliseconds(), Class: class, Msg: msg, KeyWaitPrefix: k.KeyWaitPrefix(q),
		TaskPrefix: k.TaskPrefix(q), Claim: s.Claim, CheckAttempts: boolArg(a.CheckAttempts),
	}))
}

// FinishDead ends the task for good: dead-lettered, or failed when the DLQ
// is off.
func (r *RDB) FinishDead(ctx context.Context, a *FinishArgs, s *WorkerSettings, class, msg string, retryable bool) error {
	k, q := r.keys, a.Queue
	l := r.limitKeys(q)
	return fenced(r.callFinishDead(ctx, &finishDeadKeys{
		Task: k.Task(q, a.ID), Lease: k.Lease(q), Events: k.Events(q), Band: k.Stream(q, a.Priority), Depth: k.Depth(q),
		Stats: k.Stats(q, minuteOf(a.Now)), DLQ: k.DLQ(q), KeyRunning: l.keyRunning, Held: l.held, Limited: l.limited,
		Wake: l.wake, Bands: r.bandStreams(q), Retained: k.Retained(q), Outbox: k.WorkflowOutbox(q), KeyFreed: l.freed,
	}, &finishDeadArgs{
		Now: a.Now.UnixMilli(), ID: a.ID, Attempt: a.Attempt, WorkerID: s.WorkerID, Group: Group,
		IdemPrefix: k.IdempotencyPrefix(q), EventsMaxLen: s.EventsMaxLen, FailedRetS: seconds(s.FailedRetention),
		AttemptsCap: AttemptsCap, Class: class, Msg: msg, DLQEnabled: boolArg(s.DLQEnabled), DLQMaxLen: s.DLQMaxLen,
		TaskPrefix: k.TaskPrefix(q), Retryable: boolArg(retryable), KeyWaitPrefix: k.KeyWaitPrefix(q), Claim: s.Claim,
	}))
}

// HandBack returns a running task to its queue with the same attempt.
func (r *RDB) HandBack(ctx context.Context, a *FinishArgs, s *WorkerSettings) error {
	k, q := r.keys, a.Queue
	l := r.limitKeys(q)
	return fenced(r.callFinishHandback(ctx, &finishHandbackKeys{
		Task: k.Task(q, a.ID), Lease: k.Lease(q), Events: k.Events(q), Band: k.Stream(q, a.Priority),
		KeyRunning: l.keyRunning, Held: l.held, Limited: l.limited, Wake: l.wake, Bands: r.bandStreams(q), KeyFreed: l.freed,
	}, &finishHandbackArgs{
		Now: a.Now.UnixMilli(), ID: a.ID, Attempt: a.Attempt, WorkerID: s.WorkerID, Group: Group,
		EventsMaxLen: s.EventsMaxLen, AttemptsCap: AttemptsCap, KeyWaitPrefix: k.KeyWaitPrefix(q), TaskPrefix: k.TaskPrefix(q),
	}))
}

func boolArg(b bool) string {
	if b {
		return "1"
	}
	return "0"
}
