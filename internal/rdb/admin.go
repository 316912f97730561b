package rdb

import (
	"context"
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
	_, cluster := r.c.(*redis.ClusterClient)
	v, err := r.callCancel(ctx, &cancelKeys{
		Task: k.Task(queue, id), Schedule: k.Schedule(queue), Expiry: k.Expiry(queue), Events: k.Events(queue),
		Depth: k.Depth(queue), Stats: k.Stats(queue, minuteOf(now)), Bands: r.bandStreams(queue),
		Retained: k.Retained(queue), Waiting: k.Waiting(queue), Outbox: k.WorkflowOutbox(queue),
	}, &cancelArgs{
		Now: now.UnixMilli(), ID: id, IdemPrefix: k.IdempotencyPrefix(queue), EventsMaxLen: s.EventsMaxLen,
		FailedRetS: seconds(s.FailedRetention), Channel: k.CancelChannel(queue), Cluster: boolArg(cluster), Reason: reason,
	})
	return v.Outcome, v.Status, err
}

// RunNow makes a pending or retrying task due now.
func (r *RDB) RunNow(ctx context.Context, queue, id string, s *AdminSettings, now time.Time) (string, string, error) {
	k := r.keys
	v, err := r.callRunNow(ctx, &runNowKeys{
		Task: k.Task(queue, id), Schedule: k.Schedule(queue), Events: k.Events(queue), Bands: r.bandStreams(queue),
	}, &runNowArgs{
		Now: now.UnixMilli(), ID: id, TaskPrefix: k.TaskPrefix(queue), EventsMaxLen: s.EventsMaxLen,
		Outcomes: boolArg(r.outcomesOnly(ctx, queue)),
	})
	return v.Outcome, v.Status, err
}

// DeleteTask removes a terminal task.
func (r *RDB) DeleteTask(ctx context.Context, queue, id string, now time.Time) (string, string, error) {
	k := r.keys
	v, err := r.callDeleteTask(ctx, &deleteTaskKeys{
		Task: k.Task(queue, id), Result: k.Result(queue, id), Recent: k.Recent(queue), DLQ: k.DLQ(queue),
		Retained: k.Retained(queue),
	}, &deleteTaskArgs{ID: id, Now: now.UnixMilli()})
	return v.Outcome, v.Status, err
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
			v, err := r.callPurgeBand(ctx, &purgeBandKeys{
				Band: k.Stream(queue, b), Expiry: k.Expiry(queue), Events: k.Events(queue), Depth: k.Depth(queue),
				Retained: k.Retained(queue), Outbox: k.WorkflowOutbox(queue),
			}, &purgeBandArgs{
				Now: now.UnixMilli(), Start: start, Max: MaxPerCall, TaskPrefix: k.TaskPrefix(queue),
				IdemPrefix: k.IdempotencyPrefix(queue), EventsMaxLen: s.EventsMaxLen, FailedRetS: seconds(s.FailedRetention),
			})
			if err != nil {
				return total, err
			}
			total += v.Cancelled
			if start = v.Last; start == "" {
				break
			}
		}
		// With key queues, the band's tasks wait there too.
		for {
			v, err := r.callPurgeKeys(ctx, &purgeKeysKeys{
				Expiry: k.Expiry(queue), Events: k.Events(queue), Depth: k.Depth(queue), Retained: k.Retained(queue),
				Outbox: k.WorkflowOutbox(queue), FairState: k.FairState(queue), FairKeys: k.FairKeys(queue),
			}, &purgeKeysArgs{
				Now: now.UnixMilli(), Band: b, Max: MaxPerCall, TaskPrefix: k.TaskPrefix(queue),
				IdemPrefix: k.IdempotencyPrefix(queue), EventsMaxLen: s.EventsMaxLen, FailedRetS: seconds(s.FailedRetention),
				FairActive: k.FairActivePrefix(queue), KeyQueue: k.KeyQueuePrefix(queue),
			})
			if err != nil {
				return total, err
			}
			total += v.Cancelled
			if v.More == 0 {
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
	v, err := r.callRecount(ctx, &recountKeys{
		Depth: k.Depth(queue), Lease: k.Lease(queue), Schedule: k.Schedule(queue), Bands: r.bandStreams(queue),
		Held: k.Held(queue), Waiting: k.Waiting(queue), FairState: k.FairState(queue),
	}, &recountArgs{Group: Group})
	return v.Old, v.New, err
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
	return r.callDLQOne(ctx, &dlqOneKeys{
		DLQ: k.DLQ(queue), Events: k.Events(queue), Depth: k.Depth(queue), Bands: r.bandStreams(queue),
		Expiry: k.Expiry(queue), Retained: k.Retained(queue),
	}, &dlqOneArgs{
		Now: now.UnixMilli(), Action: action, ID: id, TaskPrefix: k.TaskPrefix(queue), IdemPrefix: k.IdempotencyPrefix(queue),
		EventsMaxLen: s.EventsMaxLen, FailedRetS: seconds(s.FailedRetention), IdemTTLS: int64(s.IdempotencyTTL / time.Second),
		DLQOff: boolArg(!s.DLQEnabled), Deadline: deadline, AttemptsCap: AttemptsCap,
	})
}

// DLQBulk requeues or discards the DLQ entries of queue matching the
// filters, examining at most MaxPerCall entries from offset. It returns how
// many entries matched and were processed, and the offset to continue from
// (-1 when done).
func (r *RDB) DLQBulk(ctx context.Context, queue, action string, offset int64, taskType, errorClass string, s *AdminSettings, now time.Time) (matched, processed, next int64, err error) {
	k := r.keys
	v, err := r.callDLQBulk(ctx, &dlqBulkKeys{
		DLQ: k.DLQ(queue), Events: k.Events(queue), Depth: k.Depth(queue), Bands: r.bandStreams(queue),
		Expiry: k.Expiry(queue), Retained: k.Retained(queue),
	}, &dlqBulkArgs{
		Now: now.UnixMilli(), Action: action, Offset: offset, Max: MaxPerCall, TaskType: taskType, ErrorClass: errorClass,
		TaskPrefix: k.TaskPrefix(queue), IdemPrefix: k.IdempotencyPrefix(queue), EventsMaxLen: s.EventsMaxLen,
		FailedRetS: seconds(s.FailedRetention), IdemTTLS: int64(s.IdempotencyTTL / time.Second), AttemptsCap: AttemptsCap,
	})
	return v.Matched, v.Processed, v.Next, err
}

// AppendAudit appends one entry (field/value pairs) to the audit stream.
func (r *RDB) AppendAudit(ctx context.Context, maxLen int64, fields []any) error {
	_, err := r.callAudit(ctx, &auditKeys{Audit: r.keys.Audit()}, &auditArgs{MaxLen: maxLen, Fields: fields})
	return err
}
