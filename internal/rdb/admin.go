package rdb

import (
	"context"
	"fmt"
	"strconv"
	"time"

	"github.com/redis/go-redis/v9"
)

// AdminSettings are the limits the admin scripts apply.
type AdminSettings struct {
	EventsMaxLen int64
	// FailedRetention is how long a task the admin ends (cancelled, or
	// discarded from the DLQ) is kept, unless its own retention says
	// otherwise; 0 deletes it at once.
	FailedRetention time.Duration
	IdempotencyTTL  time.Duration
	DLQEnabled      bool
	AuditMaxLen     int64
}

// Admin outcomes shared by several scripts.
const (
	OutcomeNotFound = "not_found"
	OutcomeTerminal = "terminal"
	OutcomeConflict = "conflict"
)

// CancelTask cancels a task (see cancel.lua). It returns the outcome and,
// for "terminal" or "conflict", the task's status.
func (r *RDB) CancelTask(ctx context.Context, queue, id string, s *AdminSettings, now time.Time, reason string) (string, string, error) {
	k := r.keys
	keys := append([]string{k.Task(queue, id), k.Schedule(queue), k.Expiry(queue), k.Events(queue),
		k.Depth(queue), k.Stats(queue, minuteOf(now))}, r.bandStreams(queue)...)
	_, cluster := r.c.(*redis.ClusterClient)
	keys = append(keys, k.Retained(queue), k.Waiting(queue), k.WorkflowOutbox(queue))
	v, err := r.run(ctx, scriptCancel, keys, now.UnixMilli(), id, k.IdempotencyPrefix(queue), s.EventsMaxLen,
		seconds(s.FailedRetention), k.CancelChannel(queue), boolArg(cluster), reason).StringSlice()
	return outcome(v, err)
}

func outcome(v []string, err error) (string, string, error) {
	if err != nil {
		return "", "", err
	}
	if len(v) == 0 {
		return "", "", fmt.Errorf("rdb: empty reply")
	}
	if len(v) > 1 {
		return v[0], v[1], nil
	}
	return v[0], "", nil
}

// RunNow makes a pending or retrying task due now.
func (r *RDB) RunNow(ctx context.Context, queue, id string, s *AdminSettings, now time.Time) (string, string, error) {
	k := r.keys
	keys := append([]string{k.Task(queue, id), k.Schedule(queue), k.Events(queue)}, r.bandStreams(queue)...)
	v, err := r.run(ctx, scriptRunNow, keys, now.UnixMilli(), id, k.TaskPrefix(queue), s.EventsMaxLen,
		boolArg(r.outcomesOnly(ctx, queue))).StringSlice()
	return outcome(v, err)
}

// DeleteTask removes a terminal task.
func (r *RDB) DeleteTask(ctx context.Context, queue, id string, now time.Time) (string, string, error) {
	k := r.keys
	v, err := r.run(ctx, scriptDeleteTask, []string{k.Task(queue, id), k.Result(queue, id), k.Recent(queue), k.DLQ(queue),
		k.Retained(queue)}, id, now.UnixMilli()).StringSlice()
	return outcome(v, err)
}

// PurgeQueue cancels every ready (queued, undelivered) task of queue, 500
// stream entries (or key queue tasks) per script call. It returns how many
// it cancelled.
func (r *RDB) PurgeQueue(ctx context.Context, queue string, s *AdminSettings, now time.Time) (int64, error) {
	k := r.keys
	var total int64
	for b := NumBands - 1; b >= 0; b-- {
		start := "-"
		for {
			v, err := r.run(ctx, scriptPurgeBand, []string{k.Stream(queue, b), k.Expiry(queue), k.Events(queue), k.Depth(queue),
				k.Retained(queue), k.WorkflowOutbox(queue)}, now.UnixMilli(), start, MaxPerCall, k.TaskPrefix(queue), k.IdempotencyPrefix(queue),
				s.EventsMaxLen, seconds(s.FailedRetention)).Slice()
			if err != nil {
				return total, err
			}
			n, _ := v[0].(int64)
			total += n
			start, _ = v[1].(string)
			if start == "" {
				break
			}
		}
		// With key queues, the band's tasks wait there too.
		for {
			v, err := r.run(ctx, scriptPurgeKeys, []string{k.Expiry(queue), k.Events(queue), k.Depth(queue), k.Retained(queue),
				k.WorkflowOutbox(queue), k.FairState(queue), k.FairKeys(queue)}, now.UnixMilli(), b, MaxPerCall,
				k.TaskPrefix(queue), k.IdempotencyPrefix(queue), s.EventsMaxLen, seconds(s.FailedRetention),
				k.FairActivePrefix(queue), k.KeyQueuePrefix(queue)).Slice()
			if err != nil {
				return total, err
			}
			n, _ := v[0].(int64)
			total += n
			if more, _ := v[1].(int64); more == 0 {
				break
			}
		}
	}
	return total, nil
}

// SetPaused pauses or resumes queue; it reports whether the state changed.
func (r *RDB) SetPaused(ctx context.Context, queue string, pause bool, s *AdminSettings, now time.Time, actor string) (bool, error) {
	mode := "resume"
	if pause {
		mode = "pause"
	}
	n, err := r.callPause(ctx, &pauseKeys{Paused: r.keys.Paused(queue), Events: r.keys.Events(queue)},
		&pauseArgs{Now: now.UnixMilli(), Mode: mode, EventsMaxLen: s.EventsMaxLen, Actor: actor})
	return n == 1, err
}

// Recount recomputes queue's depth counter; it returns the old and new value.
func (r *RDB) Recount(ctx context.Context, queue string) (int64, int64, error) {
	k := r.keys
	keys := append(append([]string{k.Depth(queue), k.Lease(queue), k.Schedule(queue)}, r.bandStreams(queue)...), k.Held(queue), k.Waiting(queue),
		k.FairState(queue))
	v, err := r.run(ctx, scriptRecount, keys, Group).Int64Slice()
	if err != nil {
		return 0, 0, err
	}
	return v[0], v[1], nil
}

func (r *RDB) dlqKeys(queue string) []string {
	k := r.keys
	return append(append([]string{k.DLQ(queue), k.Events(queue), k.Depth(queue)}, r.bandStreams(queue)...), k.Expiry(queue),
		k.Retained(queue))
}

// DLQRequeue requeues one task of the DLQ index as a fresh start
// ("requeued", "conflict" or "not_found"; see dlq_requeue_one in lua/_lifecycle.lua).
// Its deadline is cleared, or set to expiresAt when that is not zero. When
// the DLQ is off, failed tasks may be requeued too.
func (r *RDB) DLQRequeue(ctx context.Context, queue, id string, s *AdminSettings, now, expiresAt time.Time) (string, error) {
	return r.dlqOne(ctx, queue, id, "requeue", s, now, expiresAt)
}

// DLQDiscard removes one task from the DLQ index ("discarded" or "not_found").
func (r *RDB) DLQDiscard(ctx context.Context, queue, id string, s *AdminSettings, now time.Time) (string, error) {
	return r.dlqOne(ctx, queue, id, "discard", s, now, time.Time{})
}

func (r *RDB) dlqOne(ctx context.Context, queue, id, action string, s *AdminSettings, now, expiresAt time.Time) (string, error) {
	k := r.keys
	deadline := ""
	if !expiresAt.IsZero() {
		deadline = strconv.FormatInt(expiresAt.UnixMilli(), 10)
	}
	return r.run(ctx, scriptDlqOne, r.dlqKeys(queue), now.UnixMilli(), action, id, k.TaskPrefix(queue),
		k.IdempotencyPrefix(queue), s.EventsMaxLen, seconds(s.FailedRetention),
		int64(s.IdempotencyTTL/time.Second), boolArg(!s.DLQEnabled), deadline, AttemptsCap).Text()
}

// DLQBulk requeues or discards the DLQ entries of queue matching the
// filters, examining at most MaxPerCall entries from offset. It returns how
// many entries matched and were processed, and the offset to continue from
// (-1 when done).
func (r *RDB) DLQBulk(ctx context.Context, queue, action string, offset int64, taskType, errorClass string, s *AdminSettings, now time.Time) (matched, processed, next int64, err error) {
	k := r.keys
	v, err := r.run(ctx, scriptDlqBulk, r.dlqKeys(queue), now.UnixMilli(), action, offset, MaxPerCall, taskType, errorClass,
		k.TaskPrefix(queue), k.IdempotencyPrefix(queue), s.EventsMaxLen, seconds(s.FailedRetention),
		int64(s.IdempotencyTTL/time.Second), AttemptsCap).Int64Slice()
	if err != nil {
		return 0, 0, 0, err
	}
	return v[0], v[1], v[2], nil
}

// AppendAudit appends one entry (field/value pairs) to the audit stream.
func (r *RDB) AppendAudit(ctx context.Context, maxLen int64, fields []any) error {
	return r.run(ctx, scriptAudit, []string{r.keys.Audit()}, append([]any{maxLen}, fields...)...).Err()
}
