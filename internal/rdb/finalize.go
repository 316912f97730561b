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
	c := r.finishSucceededCall(queue, s, now, tasks)
	v, err := r.run(ctx, scriptFinishSucceeded, c.keys(), c.args()...).Int64Slice()
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
	k := r.keys
	c := &finishRetryCall{finishHead: r.finishHead(a, s),
		schedule: k.Schedule(a.Queue), expiry: k.Expiry(a.Queue), limit: r.limitSet(a.Queue),
		bands: r.bandStreams(a.Queue), retained: k.Retained(a.Queue),
		delayMS: delay.Milliseconds(), class: class, msg: msg, keyWaitPrefix: k.KeyWaitPrefix(a.Queue),
		taskPrefix: k.TaskPrefix(a.Queue), claim: s.Claim, checkAttempts: boolArg(a.CheckAttempts)}
	return fenced(r.run(ctx, scriptFinishRetry, c.keys(), c.args()...).Text())
}

// FinishDead ends the task for good: dead-lettered, or failed when the DLQ
// is off.
func (r *RDB) FinishDead(ctx context.Context, a *FinishArgs, s *WorkerSettings, class, msg string, retryable bool) error {
	k := r.keys
	c := &finishDeadCall{finishHead: r.finishHead(a, s),
		dlq: k.DLQ(a.Queue), limit: r.limitSet(a.Queue), bands: r.bandStreams(a.Queue), retained: k.Retained(a.Queue),
		class: class, msg: msg, dlqEnabled: boolArg(s.DLQEnabled), dlqMaxLen: s.DLQMaxLen,
		taskPrefix: k.TaskPrefix(a.Queue), retryable: boolArg(retryable), keyWaitPrefix: k.KeyWaitPrefix(a.Queue),
		claimNonce: s.Claim}
	return fenced(r.run(ctx, scriptFinishDead, c.keys(), c.args()...).Text())
}

// HandBack returns a running task to its queue with the same attempt.
func (r *RDB) HandBack(ctx context.Context, a *FinishArgs, s *WorkerSettings) error {
	k := r.keys
	c := &handBackCall{task: k.Task(a.Queue, a.ID), lease: k.Lease(a.Queue), events: k.Events(a.Queue),
		band: k.Stream(a.Queue, a.Priority), limit: r.limitSet(a.Queue), bands: r.bandStreams(a.Queue),
		now: a.Now.UnixMilli(), id: a.ID, attempt: a.Attempt, worker: s.WorkerID, group: Group,
		eventsMaxLen: s.EventsMaxLen, attemptsCap: AttemptsCap, keyWaitPrefix: k.KeyWaitPrefix(a.Queue),
		taskPrefix: k.TaskPrefix(a.Queue)}
	return fenced(r.run(ctx, scriptFinishHandback, c.keys(), c.args()...).Text())
}

func boolArg(b bool) string {
	if b {
		return "1"
	}
	return "0"
}
