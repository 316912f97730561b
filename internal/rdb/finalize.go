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

func (r *RDB) finishKeys(a *FinishArgs) []string {
	k := r.keys
	return []string{k.Task(a.Queue, a.ID), k.Lease(a.Queue), k.Events(a.Queue),
		k.Stream(a.Queue, a.Priority), k.Depth(a.Queue), k.Stats(a.Queue, minuteOf(a.Now))}
}

// limitKeys are the keys a script that stops a running task needs to give
// back its concurrency-key slot and wake limited workers (see release_key
// and wake_limited in _lib.lua).
func (r *RDB) limitKeys(queue string) []string {
	k := r.keys
	return []string{k.KeyRunning(queue), k.Held(queue), k.Limited(queue), k.Wake(queue)}
}

func (r *RDB) finishArgs(a *FinishArgs, s *WorkerSettings) []any {
	return []any{a.Now.UnixMilli(), a.ID, a.Attempt, s.WorkerID, Group,
		r.keys.IdempotencyPrefix(a.Queue), s.EventsMaxLen, seconds(s.FailedRetention), AttemptsCap}
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
	keys := append([]string{k.Lease(queue), k.Events(queue), k.Depth(queue), k.Stats(queue, minuteOf(now))}, r.bandStreams(queue)...)
	keys = append(append(keys, r.limitKeys(queue)...), k.Retained(queue))
	args := []any{now.UnixMilli(), s.WorkerID, Group, k.IdempotencyPrefix(queue), s.EventsMaxLen,
		seconds(s.SucceededRetention), seconds(s.ResultRetention), len(tasks),
		k.KeyWaitPrefix(queue), k.TaskPrefix(queue), s.Claim}
	for _, t := range tasks {
		keys = append(keys, k.Task(queue, t.ID), k.Result(queue, t.ID))
		args = append(args, t.ID, t.Attempt, t.Result, boolArg(t.Truncated))
	}
	v, err := r.run(ctx, scriptFinishSucceeded, keys, args...).Int64Slice()
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
	keys := append(r.finishKeys(a), r.keys.Schedule(a.Queue), r.keys.Expiry(a.Queue))
	keys = append(append(append(keys, r.limitKeys(a.Queue)...), r.bandStreams(a.Queue)...), r.keys.Retained(a.Queue))
	args := append(r.finishArgs(a, s), delay.Milliseconds(), class, msg, r.keys.KeyWaitPrefix(a.Queue), r.keys.TaskPrefix(a.Queue),
		s.Claim, boolArg(a.CheckAttempts))
	return fenced(r.run(ctx, scriptFinishRetry, keys, args...).Text())
}

// FinishDead ends the task for good: dead-lettered, or failed when the DLQ
// is off.
func (r *RDB) FinishDead(ctx context.Context, a *FinishArgs, s *WorkerSettings, class, msg string, retryable bool) error {
	keys := append(r.finishKeys(a), r.keys.DLQ(a.Queue))
	keys = append(append(append(keys, r.limitKeys(a.Queue)...), r.bandStreams(a.Queue)...), r.keys.Retained(a.Queue))
	args := append(r.finishArgs(a, s), class, msg, boolArg(s.DLQEnabled), s.DLQMaxLen,
		r.keys.TaskPrefix(a.Queue), boolArg(retryable), r.keys.KeyWaitPrefix(a.Queue), r.keys.TaskPrefix(a.Queue), s.Claim)
	return fenced(r.run(ctx, scriptFinishDead, keys, args...).Text())
}

// HandBack returns a running task to its queue with the same attempt.
func (r *RDB) HandBack(ctx context.Context, a *FinishArgs, s *WorkerSettings) error {
	k := r.keys
	keys := []string{k.Task(a.Queue, a.ID), k.Lease(a.Queue), k.Events(a.Queue), k.Stream(a.Queue, a.Priority)}
	keys = append(append(keys, r.limitKeys(a.Queue)...), r.bandStreams(a.Queue)...)
	return fenced(r.run(ctx, scriptFinishHandback, keys, a.Now.UnixMilli(), a.ID, a.Attempt, s.WorkerID, Group,
		s.EventsMaxLen, AttemptsCap, k.KeyWaitPrefix(a.Queue), k.TaskPrefix(a.Queue)).Text())
}

func boolArg(b bool) string {
	if b {
		return "1"
	}
	return "0"
}
