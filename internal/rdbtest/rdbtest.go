// Package rdbtest writes tasks in any state straight into Redis for storage
// tests, through the same scripts the client and the workers run (ingest,
// claim, the finalizers, cancel, the expiry sweep), so the records it leaves
// are the ones production leaves and tests need no hand-written HSETs.
package rdbtest

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/dtq-io/dtq/dtqtype"
	"github.com/dtq-io/dtq/internal/rdb"
)

// Default values of a Task's zero fields.
const (
	DefaultQueue       = "default"
	DefaultType        = "echo"
	DefaultMaxAttempts = 5
	DefaultTimeout     = 30 * time.Second
	DefaultDelay       = time.Minute // of a pending or retrying task
)

// Task describes the task to write. Zero fields take the defaults above;
// Now is the clock every script of the write runs at.
type Task struct {
	Queue          string
	Type           string
	Payload        []byte // JSON object; nil = {}
	Priority       int    // 0..9
	MaxAttempts    int
	Timeout        time.Duration
	IdempotencyKey string
	ConcurrencyKey string
	Metadata       []byte        // JSON object; nil = {}
	ExpiresAt      time.Time     // zero = none (an expired task gets Now+1ms)
	Delay          time.Duration // pending: available after Now+Delay; retrying: next attempt after Now+Delay
	Now            time.Time     // zero = time.Now()

	// Result is a succeeded task's result JSON (nil = none).
	Result []byte
	// ErrorClass and Error are a retrying, failed or dead-lettered task's
	// last error ("handler_error" and "boom" when empty).
	ErrorClass, Error string
}

// WrittenTask is a task the factory wrote, as stored and as claimed.
type WrittenTask struct {
	Queue string
	ID    string
	// Task is the stored task as GetTask reads it after the write.
	Task *dtqtype.TaskInfo
	// Claimed is the attempt the claim delivered, for states reached
	// through a claim (running, retrying, succeeded, failed,
	// dead_lettered); for a running task it holds the lease the worker
	// Settings.WorkerID renews or finalizes with.
	Claimed *rdb.ClaimedTask
}

// FinishArgs returns the arguments a finalize of m's claimed attempt takes,
// at now.
func (m *WrittenTask) FinishArgs(now time.Time) *rdb.FinishArgs {
	return &rdb.FinishArgs{Queue: m.Queue, ID: m.ID, Attempt: m.Claimed.Attempt, Priority: m.Claimed.Priority, Now: now}
}

// Factory writes tasks through one RDB. Its settings are used by the
// scripts it runs; change them before use if a test needs others.
type Factory struct {
	R        *rdb.RDB
	Settings *rdb.WorkerSettings // claims and finalizes; DLQEnabled is set per state
	Admin    *rdb.AdminSettings  // cancel
	Limits   rdb.IngestOptions
}

// New returns a factory writing through r, with a 30s lease held by worker
// "rdbtest-worker", every retention an hour (finished tasks stay readable)
// and room for 10000 tasks per queue.
func New(r *rdb.RDB) *Factory {
	return &Factory{
		R: r,
		Settings: &rdb.WorkerSettings{WorkerID: "rdbtest-worker", Lease: 30 * time.Second, EventsMaxLen: 10000,
			SucceededRetention: time.Hour, FailedRetention: time.Hour, ResultRetention: time.Hour,
			DLQEnabled: true, DLQMaxLen: 10000},
		Admin:  &rdb.AdminSettings{EventsMaxLen: 10000, FailedRetention: time.Hour, IdempotencyTTL: time.Hour, DLQEnabled: true, AuditMaxLen: 1000},
		Limits: rdb.IngestOptions{MaxDepth: 10000, EventsMaxLen: 10000, RecentCap: 10000},
	}
}

// States lists the states Make writes, in lifecycle order.
var States = []dtqtype.Status{
	dtqtype.StatusPending, dtqtype.StatusQueued, dtqtype.StatusRunning, dtqtype.StatusRetrying,
	dtqtype.StatusSucceeded, dtqtype.StatusFailed, dtqtype.StatusDeadLettered,
	dtqtype.StatusCancelled, dtqtype.StatusExpired,
}

// Make writes one task in status and fails tb if it cannot; it checks that
// the stored task ended in status.
//
// States reached through a claim (running and the states a finalize
// reaches) claim one task of the queue: the task must be the next one the
// queue delivers, so use a queue of its own or a priority above the
// others'. An expired task is swept by SweepExpired at its deadline, which
// expires any other overdue task of the queue too.
func (f *Factory) Make(tb testing.TB, status dtqtype.Status, spec Task) *WrittenTask {
	tb.Helper()
	ctx := context.Background()
	spec = f.defaults(spec)
	if status == dtqtype.StatusExpired && spec.ExpiresAt.IsZero() {
		spec.ExpiresAt = spec.Now.Add(time.Millisecond)
	}
	delayed := status == dtqtype.StatusPending
	m := f.ingest(tb, ctx, spec, delayed)

	switch status {
	case dtqtype.StatusPending, dtqtype.StatusQueued:
	case dtqtype.StatusCancelled:
		outcome, st, err := f.R.CancelTask(ctx, m.Queue, m.ID, f.Admin, spec.Now, "rdbtest")
		require.NoError(tb, err)
		require.Equal(tb, "cancelled", outcome, "cancel answered %q (status %q)", outcome, st)
	case dtqtype.StatusExpired:
		p, err := f.R.SweepExpired(ctx, m.Queue, f.Settings, spec.ExpiresAt)
		require.NoError(tb, err)
		require.GreaterOrEqual(tb, p.Done, 1)
	case dtqtype.StatusRunning, dtqtype.StatusRetrying, dtqtype.StatusSucceeded, dtqtype.StatusFailed, dtqtype.StatusDeadLettered:
		m.Claimed = f.claim(tb, ctx, spec, m.ID)
		f.finish(tb, ctx, status, spec, m)
	default:
		tb.Fatalf("rdbtest: cannot make a task in status %q", status)
	}

	ti, err := f.R.GetTask(ctx, m.ID)
	require.NoError(tb, err)
	require.NotNil(tb, ti, "rdbtest: task %s not found after the write", m.ID)
	require.Equal(tb, status, ti.Status, "rdbtest: task %s", m.ID)
	m.Task = ti
	return m
}

func (f *Factory) defaults(spec Task) Task {
	if spec.Queue == "" {
		spec.Queue = DefaultQueue
	}
	if spec.Type == "" {
		spec.Type = DefaultType
	}
	if spec.Payload == nil {
		spec.Payload = []byte("{}")
	}
	if spec.MaxAttempts == 0 {
		spec.MaxAttempts = DefaultMaxAttempts
	}
	if spec.Timeout == 0 {
		spec.Timeout = DefaultTimeout
	}
	if spec.Metadata == nil {
		spec.Metadata = []byte("{}")
	}
	if spec.Delay == 0 {
		spec.Delay = DefaultDelay
	}
	if spec.Now.IsZero() {
		spec.Now = time.Now()
	}
	if spec.ErrorClass == "" {
		spec.ErrorClass = "handler_error"
	}
	if spec.Error == "" {
		spec.Error = "boom"
	}
	return spec
}

func (f *Factory) ingest(tb testing.TB, ctx context.Context, spec Task, delayed bool) *WrittenTask {
	tb.Helper()
	num, err := f.R.QueueNumber(ctx, spec.Queue)
	require.NoError(tb, err)
	now := spec.Now.UnixMilli()
	nt := rdb.NewTask{
		ID: rdb.NewTaskID(num, spec.Now), Type: spec.Type, Payload: spec.Payload, Priority: spec.Priority,
		MaxAttempts: spec.MaxAttempts, TimeoutMS: spec.Timeout.Milliseconds(), IdempotencyKey: spec.IdempotencyKey,
		AvailableAt: now, Metadata: spec.Metadata, Fingerprint: "rdbtest", IdemTTL: 3600, CreatedAt: now,
		ConcurrencyKey: spec.ConcurrencyKey,
	}
	if delayed {
		nt.AvailableAt = spec.Now.Add(spec.Delay).UnixMilli()
	}
	if !spec.ExpiresAt.IsZero() {
		nt.ExpiresAt = spec.ExpiresAt.UnixMilli()
	}
	res, err := f.R.Ingest(ctx, spec.Queue, spec.Now, f.Limits, []rdb.NewTask{nt})
	require.NoError(tb, err)
	require.Len(tb, res, 1)
	require.Equal(tb, rdb.Created, res[0].Outcome, "rdbtest: ingest of %s", nt.ID)
	return &WrittenTask{Queue: spec.Queue, ID: nt.ID}
}

func (f *Factory) claim(tb testing.TB, ctx context.Context, spec Task, id string) *rdb.ClaimedTask {
	tb.Helper()
	require.NoError(tb, f.R.EnsureGroups(ctx, spec.Queue))
	cr, err := f.R.Claim(ctx, spec.Queue, f.Settings, 1, spec.Now, "rdbtest-"+id)
	require.NoError(tb, err)
	require.Len(tb, cr.Tasks, 1, "rdbtest: the claim delivered nothing (paused %v, limited %v)", cr.Paused, cr.Limited)
	require.Equal(tb, id, cr.Tasks[0].ID,
		"rdbtest: the claim delivered another task first: give the task a queue of its own or a higher priority")
	return &cr.Tasks[0]
}

func (f *Factory) finish(tb testing.TB, ctx context.Context, status dtqtype.Status, spec Task, m *WrittenTask) {
	tb.Helper()
	a := m.FinishArgs(spec.Now)
	switch status {
	case dtqtype.StatusRetrying:
		require.NoError(tb, f.R.FinishRetry(ctx, a, f.Settings, spec.Delay, spec.ErrorClass, spec.Error))
	case dtqtype.StatusSucceeded:
		errs, err := f.R.FinishSucceeded(ctx, m.Queue, f.Settings, spec.Now,
			[]rdb.Success{{ID: m.ID, Attempt: m.Claimed.Attempt, Result: spec.Result}})
		require.NoError(tb, err)
		require.NoError(tb, errs[0])
	case dtqtype.StatusFailed, dtqtype.StatusDeadLettered:
		s := *f.Settings
		s.DLQEnabled = status == dtqtype.StatusDeadLettered
		require.NoError(tb, f.R.FinishDead(ctx, a, &s, spec.ErrorClass, spec.Error, false))
	case dtqtype.StatusRunning: // claimed: nothing to finish
	default:
		tb.Fatalf("rdbtest: cannot finish a task into status %q", status)
	}
}
