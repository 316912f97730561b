package dtq

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"time"

	"github.com/dtq-io/dtq/dtqtype"
	"github.com/dtq-io/dtq/internal/cursor"
	"github.com/dtq-io/dtq/internal/rdb"
)

// AdminConfig configures an Admin. Zero values select the defaults noted.
// The Admin's other settings are the Deployment's: FailedRetention is how
// long a task it ends (cancelled, purged, discarded from the DLQ) is kept,
// unless its own retention says otherwise; IdempotencyTTL is the fresh TTL
// a DLQ requeue gives the task's idempotency record; with DisableDLQ,
// failed tasks may be requeued by id.
type AdminConfig struct {
	// Client submits the tasks of triggered schedules, and its limits
	// (attempts cap, payload size, task types) validate schedules' task
	// fields. It must use the Deployment's KeyPrefix. Default: a Client
	// with default limits.
	Client *Client
}

// Admin performs operator actions: cancel, run-now, delete, queue
// pause/resume/purge/recount and dead-letter requeue/discard. Every action is
// one atomic script per task (bulk actions: per batch of at most 500). It is
// safe for concurrent use.
type Admin struct {
	rdb      *rdb.RDB
	settings rdb.AdminSettings
	clock    func() time.Time
	client   *Client
}

// NewAdmin returns an Admin of d configured by cfg (nil selects every
// default). It fails when cfg.Client uses another key prefix.
func (d *Deployment) NewAdmin(cfg *AdminConfig) (*Admin, error) {
	var client *Client
	if cfg != nil {
		client = cfg.Client
	}
	client, err := d.clientOr(client, "AdminConfig")
	if err != nil {
		return nil, err
	}
	return &Admin{rdb: d.storage(), clock: d.dep.clock, client: client, settings: d.dep.adminSettings()}, nil
}

// queueOf finds a task's queue from its id.
func (a *Admin) queueOf(ctx context.Context, id string) (string, error) {
	q, err := a.rdb.TaskQueue(ctx, id)
	if err != nil {
		return "", err
	}
	if q == "" {
		return "", ErrTaskNotFound
	}
	return q, nil
}

// taskStateError is the error of a script outcome on task id of status:
// nil unless the outcome refused the action.
func taskStateError(id, outcome, status string) error {
	switch outcome {
	case rdb.OutcomeNotFound:
		return ErrTaskNotFound
	case rdb.OutcomeTerminal:
		return &TaskStateError{TaskID: id, Status: status, err: ErrTaskTerminal}
	case rdb.OutcomeConflict:
		return &TaskStateError{TaskID: id, Status: status, err: ErrTaskConflict}
	}
	return nil
}

// CancelResult says what CancelTask did.
type CancelResult struct {
	Task *dtqtype.TaskInfo
	// Requested is true when the task was running: the cancel was requested
	// and its worker stops the handler (the task ends cancelled, or succeeded
	// if the handler finished anyway).
	Requested bool
}

// CancelTask cancels a pending, queued or retrying task at once, or
// requests the cancel of a running one. Repeating a cancel is harmless,
// also once the task is cancelled; any other finished task gives
// *TaskStateError (ErrTaskTerminal).
func (a *Admin) CancelTask(ctx context.Context, id, reason string) (*CancelResult, error) {
	q, err := a.queueOf(ctx, id)
	if err != nil {
		return nil, err
	}
	if reason == "" {
		reason = "cancelled by request"
	}
	out, st, err := a.rdb.CancelTask(ctx, q, id, &a.settings, a.clock(), reason)
	if err != nil {
		return nil, err
	}
	if err := taskStateError(id, out, st); err != nil {
		return nil, err
	}
	t, err := a.rdb.GetTask(ctx, id)
	if err != nil {
		return nil, mapNotFound(err, ErrTaskNotFound)
	}
	return &CancelResult{Task: t, Requested: out == "requested" || out == "already_requested"}, nil
}

func mapNotFound(err, to error) error {
	if errors.Is(err, rdb.ErrNotFound) {
		return to
	}
	return err
}

// RunNow makes a pending or retrying task due now. Other states give
// *TaskStateError (ErrTaskTerminal or ErrTaskConflict).
func (a *Admin) RunNow(ctx context.Context, id string) (*dtqtype.TaskInfo, error) {
	q, err := a.queueOf(ctx, id)
	if err != nil {
		return nil, err
	}
	out, st, err := a.rdb.RunNow(ctx, q, id, &a.settings, a.clock())
	if err != nil {
		return nil, err
	}
	if err := taskStateError(id, out, st); err != nil {
		return nil, err
	}
	t, err := a.rdb.GetTask(ctx, id)
	return t, mapNotFound(err, ErrTaskNotFound)
}

// DeleteTask removes a finished task. A live task gives *TaskStateError
// (ErrTaskConflict): cancel it first.
func (a *Admin) DeleteTask(ctx context.Context, id string) error {
	q, err := a.queueOf(ctx, id)
	if err != nil {
		return err
	}
	out, st, err := a.rdb.DeleteTask(ctx, q, id, a.clock())
	if err != nil {
		return err
	}
	return taskStateError(id, out, st)
}

func (a *Admin) knownQueue(ctx context.Context, q string) error {
	if !ValidQueueName(q) {
		return invalid("queue", "must match ^[a-z0-9][a-z0-9_-]{0,63}$")
	}
	ok, err := a.rdb.QueueExists(ctx, q)
	if err != nil {
		return err
	}
	if !ok {
		return ErrQueueNotFound
	}
	return nil
}

// PurgeQueue cancels every ready (queued) task of queue and returns how
// many. Delayed, retrying and running tasks are left alone.
func (a *Admin) PurgeQueue(ctx context.Context, queue string) (int64, error) {
	if err := a.knownQueue(ctx, queue); err != nil {
		return 0, err
	}
	parts, err := a.rdb.PartitionsOf(ctx, queue)
	if err != nil {
		return 0, err
	}
	var n int64
	for _, part := range parts {
		m, err := a.rdb.PurgeQueue(ctx, part, &a.settings, a.clock())
		n += m
		if err != nil {
			return n, err
		}
	}
	return n, nil
}

// PauseQueue stops delivery from queue (any valid name, even one not used
// yet). It reports whether the queue was running before.
func (a *Admin) PauseQueue(ctx context.Context, queue, actor string) (bool, error) {
	if !ValidQueueName(queue) {
		return false, invalid("queue", "must match ^[a-z0-9][a-z0-9_-]{0,63}$")
	}
	return a.setPaused(ctx, queue, true, actor)
}

// setPaused pauses or resumes every partition of queue; it reports whether
// any changed.
func (a *Admin) setPaused(ctx context.Context, queue string, pause bool, actor string) (bool, error) {
	parts, err := a.rdb.PartitionsOf(ctx, queue)
	if err != nil {
		return false, err
	}
	changed := false
	for _, part := range parts {
		c, err := a.rdb.SetPaused(ctx, part, pause, &a.settings, a.clock(), actor)
		if err != nil {
			return changed, err
		}
		changed = changed || c
	}
	return changed, nil
}

// ResumeQueue restarts delivery from queue. It reports whether the queue was
// paused before.
func (a *Admin) ResumeQueue(ctx context.Context, queue, actor string) (bool, error) {
	if !ValidQueueName(queue) {
		return false, invalid("queue", "must match ^[a-z0-9][a-z0-9_-]{0,63}$")
	}
	return a.setPaused(ctx, queue, false, actor)
}

// MaxPartitions bounds QueueOptions.Partitions.
const MaxPartitions = rdb.MaxPartitions

// QueueOptions are a queue's settings fixed at creation.
type QueueOptions struct {
	// Partitions spreads the queue over this many partitions (1..256),
	// each on its own hash slot, chosen so that they spread evenly over a
	// Redis Cluster's masters (docs/partitions.md). 0 leaves an existing
	// queue as it is and creates a new one with 1.
	Partitions int
}

// PartitionsConflictError is returned by CreateQueue for a queue that
// exists with another number of partitions than asked: a queue's
// partitions are fixed when it is created. It matches ErrPartitionsConflict.
type PartitionsConflictError struct {
	Queue string
	Has   int // the queue's partitions
	Asked int
}

// Error says how many partitions the queue has.
func (e *PartitionsConflictError) Error() string {
	return fmt.Sprintf("dtq: queue %s exists with %d partition(s), not %d: partitions are chosen when a queue is created; "+
		"create a new queue with the partitions wanted, or leave partitions out to keep the queue as it is", e.Queue, e.Has, e.Asked)
}

// Unwrap returns ErrPartitionsConflict.
func (e *PartitionsConflictError) Unwrap() error { return ErrPartitionsConflict }

// CreateQueue adds queue to the registry (docs/security.md: under the declared
// policy only such queues accept tasks), with opts' partitions (nil: one,
// or as it is). It reports whether the queue is new; creating an existing
// queue changes nothing, and asking an existing queue for another number of
// partitions is a *PartitionsConflictError. All 65535 numbers in use is a
// *ValidationError.
func (a *Admin) CreateQueue(ctx context.Context, queue string, opts *QueueOptions) (bool, error) {
	if !ValidQueueName(queue) {
		return false, invalid("queue", "must match ^[a-z0-9][a-z0-9_-]{0,63}$")
	}
	p := 0
	if opts != nil {
		p = opts.Partitions
	}
	if p < 0 || p > MaxPartitions {
		return false, invalid("partitions", "must be 1..%d", MaxPartitions)
	}
	var created bool
	var err error
	if p > 1 {
		var names []string
		created, names, err = a.rdb.PartitionQueue(ctx, queue, p)
		if errors.Is(err, rdb.ErrQueueExists) {
			return false, &PartitionsConflictError{Queue: queue, Has: 1, Asked: p}
		}
		if err == nil && len(names) != p {
			return false, &PartitionsConflictError{Queue: queue, Has: len(names), Asked: p}
		}
	} else {
		_, created, err = a.rdb.RegisterQueue(ctx, queue, true)
		if err == nil && p == 1 {
			parts, perr := a.rdb.Partitions(ctx, queue, false)
			if perr != nil {
				return false, perr
			}
			if len(parts) != 1 {
				return false, &PartitionsConflictError{Queue: queue, Has: len(parts), Asked: p}
			}
		}
	}
	if errors.Is(err, rdb.ErrQueueRegistryFull) {
		return false, invalid("queue", "all 65535 queue numbers are in use; delete unused queues first")
	}
	return created, err
}

// QueuePartitions returns how many partitions queue has (1 for a queue
// that is not partitioned); ErrQueueNotFound for a queue the registry does
// not hold.
func (a *Admin) QueuePartitions(ctx context.Context, queue string) (int, error) {
	if !ValidQueueName(queue) {
		return 0, invalid("queue", "must match ^[a-z0-9][a-z0-9_-]{0,63}$")
	}
	parts, err := a.rdb.Partitions(ctx, queue, false)
	if errors.Is(err, rdb.ErrQueueNotRegistered) {
		return 0, ErrQueueNotFound
	}
	return len(parts), err
}

// QueueNotEmptyError is returned by DeleteQueue for a queue that still
// holds tasks. It matches ErrQueueNotEmpty.
type QueueNotEmptyError struct {
	Queue string
	// What is what the queue holds: live, scheduled, running, expiring,
	// dead_lettered, ready or delivered tasks.
	What  string
	Count int64
}

// Error says what the queue still holds.
func (e *QueueNotEmptyError) Error() string {
	return fmt.Sprintf("dtq: queue %s is not empty: %d %s", e.Queue, e.Count, e.What)
}

// Unwrap returns ErrQueueNotEmpty.
func (e *QueueNotEmptyError) Unwrap() error { return ErrQueueNotEmpty }

// DeleteQueue removes an empty queue from the registry, freeing its number
// for a later queue, and drops its empty structures, its event stream and
// its listing index; finished tasks, results and stats expire on their own.
// A queue holding any live task or dead-letter entry is a
// *QueueNotEmptyError; an unknown one ErrQueueNotFound. Producers should
// have stopped: a submission that raced the deletion may recreate the
// queue (open policy).
func (a *Admin) DeleteQueue(ctx context.Context, queue string) error {
	if !ValidQueueName(queue) {
		return invalid("queue", "must match ^[a-z0-9][a-z0-9_-]{0,63}$")
	}
	parts, err := a.rdb.Partitions(ctx, queue, false)
	if errors.Is(err, rdb.ErrQueueNotRegistered) {
		return ErrQueueNotFound
	}
	if err != nil {
		return err
	}
	// A partitioned queue goes partition by partition, its own name last:
	// its map leaves the registry with it, so a deletion stopped by a
	// partition holding tasks leaves a queue that still names all of them.
	for i, part := range slices.Backward(parts) {
		res, err := a.rdb.DeleteQueue(ctx, part)
		if errors.Is(err, rdb.ErrQueueNotRegistered) {
			if i == 0 {
				return ErrQueueNotFound
			}
			continue // deleted by an earlier call that stopped later
		}
		if err != nil {
			return err
		}
		if !res.Deleted {
			return &QueueNotEmptyError{Queue: queue, What: res.NotEmpty, Count: res.Count}
		}
	}
	return nil
}

// RecountQueue recomputes queue's depth counter from its streams, leases and
// schedule, repairing drift after manual edits. It returns the old and new
// depth.
func (a *Admin) RecountQueue(ctx context.Context, queue string) (int64, int64, error) {
	if err := a.knownQueue(ctx, queue); err != nil {
		return 0, 0, err
	}
	parts, err := a.rdb.PartitionsOf(ctx, queue)
	if err != nil {
		return 0, 0, err
	}
	var before, after int64
	for _, part := range parts {
		o, n, err := a.rdb.Recount(ctx, part)
		if err != nil {
			return before, after, err
		}
		before, after = before+o, after+n
	}
	return before, after, nil
}

// RequeueOptions are the options of one DLQ requeue.
type RequeueOptions struct {
	// ExpiresAt is the requeued task's new start deadline. Zero: none.
	ExpiresAt time.Time
	// TTL sets the deadline to the requeue time plus TTL instead (whole
	// seconds). Zero: none. Setting both is an error.
	TTL time.Duration
}

// RequeueDLQ puts a task of the dead-letter queue back in its queue as a
// fresh start: attempt 1, previous_attempts +1, the last error cleared, no
// deadline, idempotency record processing again with a fresh TTL. A task
// that is not in the DLQ index (discarded, dropped by the cap, or never
// dead-lettered) is ErrDLQEntryNotFound. When the DLQ is off, failed tasks
// may be requeued the same way. opt may give the requeued task a new
// deadline; one in the past, or both ExpiresAt and TTL, is a
// *ValidationError (ErrInvalidTask). The zero RequeueOptions sets none.
func (a *Admin) RequeueDLQ(ctx context.Context, id string, opt RequeueOptions) (*dtqtype.TaskInfo, error) {
	now := a.clock()
	deadline := opt.ExpiresAt
	switch {
	case !opt.ExpiresAt.IsZero() && opt.TTL != 0:
		return nil, invalid("expires_at", "give expires_at or ttl_seconds, not both")
	case opt.TTL < 0 || opt.TTL%time.Second != 0:
		return nil, invalid("ttl_seconds", "must be a positive whole number of seconds")
	case opt.TTL > 0:
		deadline = now.Add(opt.TTL)
	case !deadline.IsZero() && !deadline.After(now):
		return nil, invalid("expires_at", "must be in the future (the task could never start)")
	}
	q, err := a.queueOf(ctx, id)
	if err != nil {
		return nil, dlqEntryNotFound(err)
	}
	out, err := a.rdb.DLQRequeue(ctx, q, id, &a.settings, now, deadline)
	if err != nil {
		return nil, err
	}
	if out != "requeued" {
		return nil, ErrDLQEntryNotFound
	}
	t, err := a.rdb.GetTask(ctx, id)
	return t, mapNotFound(err, ErrTaskNotFound)
}

// dlqEntryNotFound is err, with a task not found as a DLQ entry not found.
func dlqEntryNotFound(err error) error {
	if errors.Is(err, ErrTaskNotFound) {
		return ErrDLQEntryNotFound
	}
	return err
}

// DiscardDLQ removes a task from the DLQ: it stays dead_lettered with
// metadata.discarded = true and its retention starts.
func (a *Admin) DiscardDLQ(ctx context.Context, id string) (*dtqtype.TaskInfo, error) {
	q, err := a.queueOf(ctx, id)
	if err != nil {
		return nil, dlqEntryNotFound(err)
	}
	out, err := a.rdb.DLQDiscard(ctx, q, id, &a.settings, a.clock())
	if err != nil {
		return nil, err
	}
	if out != "discarded" {
		return nil, ErrDLQEntryNotFound
	}
	t, err := a.rdb.GetTask(ctx, id)
	return t, mapNotFound(err, ErrTaskNotFound)
}

// DLQFilter selects the dead-letter entries of a bulk action.
type DLQFilter = dtqtype.DLQFilter

// bulkBudget bounds the script calls one bulk request makes before it
// answers with a cursor to continue from.
const bulkBudget = 20

// maxBulkOffset bounds a bulk cursor's offset: far above any dead-letter
// index (DTQ_DLQ_MAXLEN), and below 1e14, past which Lua would print the
// number as 1e+14 and Redis refuse it.
const maxBulkOffset = 1 << 40

// RequeueDLQMatching requeues the dead-letter entries matching f, at most
// 500 per script call and about 10000 per call of this method; continue
// with the returned cursor until it is nil.
func (a *Admin) RequeueDLQMatching(ctx context.Context, f DLQFilter) (*dtqtype.BulkResult, error) {
	return a.bulk(ctx, "requeue", f)
}

// PurgeDLQMatching discards the dead-letter entries matching f (see
// DiscardDLQ), like RequeueDLQMatching.
func (a *Admin) PurgeDLQMatching(ctx context.Context, f DLQFilter) (*dtqtype.BulkResult, error) {
	return a.bulk(ctx, "discard", f)
}

func (a *Admin) bulk(ctx context.Context, action string, f DLQFilter) (*dtqtype.BulkResult, error) {
	var queues []string
	var err error
	switch {
	case f.Queue == "":
		queues, err = a.rdb.Queues(ctx)
	case !ValidQueueName(f.Queue):
		return nil, invalid("queue", "must match ^[a-z0-9][a-z0-9_-]{0,63}$")
	default:
		queues, err = a.rdb.PartitionsOf(ctx, f.Queue) // a partitioned queue's every partition
	}
	if err != nil {
		return nil, err
	}
	// The cursor is where the action stopped: a registry index and an
	// offset in that queue's dead-letter index.
	queue, offset := 0, int64(0)
	if f.Cursor != "" {
		c := cursor.Read(f.Cursor, cursor.DLQBulk)
		queue, offset = int(c.Int(0, int64(len(queues)))), c.Int(0, maxBulkOffset)
		if err := c.Err(); err != nil {
			return nil, err
		}
	}
	res := &dtqtype.BulkResult{}
	for calls := 0; queue < len(queues); calls++ {
		if calls == bulkBudget {
			next := cursor.Encode(cursor.DLQBulk, strconv.Itoa(queue), strconv.FormatInt(offset, 10))
			res.NextCursor = &next
			return res, nil
		}
		matched, processed, next, err := a.rdb.DLQBulk(ctx, queues[queue], action, offset, f.Type, f.ErrorClass, &a.settings, a.clock())
		if err != nil {
			return res, fmt.Errorf("dtq: bulk %s: %w", action, err)
		}
		res.Matched += matched
		res.Processed += processed
		if next < 0 {
			queue, offset = queue+1, 0
		} else {
			offset = next
		}
	}
	return res, nil
}

// AuditRecord is one destructive action for the audit stream.
type AuditRecord struct {
	Actor     string // the API key's name
	Role      string
	Action    string // e.g. "task.cancel", "dlq.requeue"
	Target    string // a task id, queue name or filter
	RequestID string
	Detail    string // optional, short
}

// Audit appends rec to the audit stream.
func (a *Admin) Audit(ctx context.Context, rec AuditRecord) error {
	fields := []any{"ts", a.clock().UnixMilli(), "actor", rec.Actor, "role", rec.Role, "action", rec.Action,
		"target", rec.Target, "request_id", rec.RequestID}
	if rec.Detail != "" {
		fields = append(fields, "detail", rec.Detail)
	}
	return a.rdb.AppendAudit(ctx, a.settings.AuditMaxLen, fields)
}
