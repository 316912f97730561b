package dtq_test

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/dtq-io/dtq"
	"github.com/dtq-io/dtq/dtqtype"
	"github.com/dtq-io/dtq/internal/workertest"
)

func (b *bundle) admin(t *testing.T) *dtq.Admin {
	t.Helper()
	a, err := b.d.NewAdmin(nil)
	require.NoError(t, err)
	return a
}

func TestCancelQueuedThenResubmitReplays(t *testing.T) {
	t.Parallel()
	b := setup(t, nil)
	a := b.admin(t)
	res, err := b.client.Submit(b.ctx, dtq.Submission{Type: "x", IdempotencyKey: "cq"})
	require.NoError(t, err)
	cr, err := a.CancelTask(b.ctx, res.TaskID, "")
	require.NoError(t, err)
	require.False(t, cr.Requested)
	require.Equal(t, dtqtype.StatusCancelled, cr.Task.Status)
	require.Equal(t, "0", b.rc.Get(b.ctx, b.keys.Depth("default")).Val())
	require.Zero(t, b.rc.XLen(b.ctx, b.keys.Stream("default", 5)).Val())
	again, err := b.client.Submit(b.ctx, dtq.Submission{Type: "x", IdempotencyKey: "cq"})
	require.NoError(t, err)
	require.True(t, again.Duplicate)
	require.Equal(t, dtqtype.StatusCancelled, again.Task.Status)

	cr, err = a.CancelTask(b.ctx, res.TaskID, "") // cancelling again is fine
	require.NoError(t, err)
	require.Equal(t, dtqtype.StatusCancelled, cr.Task.Status)
	_, err = a.CancelTask(b.ctx, "0190a5c4e2c07000800000000000ffff", "")
	require.ErrorIs(t, err, dtq.ErrTaskNotFound)
	require.Equal(t, []string{"TASK_QUEUED", "TASK_CANCELLED"}, b.events(t, "default", res.TaskID))
}

func TestCancelRunningViaAdmin(t *testing.T) {
	t.Parallel()
	b := setup(t, nil)
	a := b.admin(t)
	started := make(chan struct{}, 1)
	w := b.worker(t, nil)
	w.HandleFunc("sleep", func(ctx context.Context, task *dtq.Task) (any, error) {
		started <- struct{}{}
		<-ctx.Done()
		return nil, ctx.Err()
	})
	workertest.Run(t, w)
	res, err := b.client.Submit(b.ctx, dtq.Submission{Type: "sleep", IdempotencyKey: "cr"})
	require.NoError(t, err)
	<-started
	cr, err := a.CancelTask(b.ctx, res.TaskID, "")
	require.NoError(t, err)
	require.True(t, cr.Requested)
	require.True(t, cr.Task.CancelRequested)
	_, err = a.CancelTask(b.ctx, res.TaskID, "") // repeated: still fine
	require.NoError(t, err)
	b.waitStatus(t, res.TaskID, dtqtype.StatusCancelled)
	require.Equal(t, "failed", mustRecord(t, b, "default", "cr").State)
	require.Equal(t, []string{"TASK_QUEUED", "TASK_STARTED", "TASK_CANCEL_REQUESTED", "TASK_CANCELLED"}, b.events(t, "default", res.TaskID))
}

// A cancel racing a claim: either the cancel wins (the handler never runs)
// or the claim wins (the handler sees the cancel); never a cancelled task
// whose handler ran to success unnoticed.
func TestCancelClaimRace(t *testing.T) {
	t.Parallel()
	b := setup(t, nil)
	a := b.admin(t)
	var mu sync.Mutex
	ran := map[string]bool{}
	w := b.worker(t, func(c *dtq.WorkerConfig) { c.Concurrency = 32 })
	w.HandleFunc("race", func(ctx context.Context, task *dtq.Task) (any, error) {
		mu.Lock()
		ran[task.ID] = true
		mu.Unlock()
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-time.After(20 * time.Millisecond):
			return "done", nil
		}
	})
	workertest.Run(t, w)
	ids := make([]string, 200)
	for i := range ids {
		res, err := b.client.Submit(b.ctx, dtq.Submission{Type: "race"})
		require.NoError(t, err)
		ids[i] = res.TaskID
		go func() { _, _ = a.CancelTask(context.Background(), res.TaskID, "") }()
	}
	for _, id := range ids {
		var ti *dtqtype.TaskInfo
		require.Eventually(t, func() bool {
			var err error
			ti, err = b.insp.GetTask(b.ctx, id)
			require.NoError(t, err)
			return ti.Status.Terminal()
		}, 20*time.Second, 5*time.Millisecond)
		mu.Lock()
		handlerRan := ran[id]
		mu.Unlock()
		switch ti.Status {
		case dtqtype.StatusCancelled:
			if handlerRan {
				require.Len(t, ti.Attempts, 1, "a cancelled task that ran must have ended through its attempt")
				require.Equal(t, "cancelled", ti.Attempts[0].Outcome)
			}
		case dtqtype.StatusSucceeded:
			require.True(t, handlerRan)
		default:
			t.Fatalf("task %s ended %s", id, ti.Status)
		}
	}
	require.Eventually(t, func() bool { return b.rc.Get(b.ctx, b.keys.Depth("default")).Val() == "0" }, 10*time.Second, 10*time.Millisecond)
}

func TestDLQRequeueAndIdempotency(t *testing.T) {
	t.Parallel()
	b := setup(t, nil)
	a := b.admin(t)
	var fail sync.Map
	fail.Store("on", true)
	w := b.worker(t, nil)
	w.HandleFunc("job", func(ctx context.Context, task *dtq.Task) (any, error) {
		if v, _ := fail.Load("on"); v == true {
			return nil, dtq.Permanent(errors.New("broken"))
		}
		return "ok", nil
	})
	workertest.Run(t, w)
	res, err := b.client.Submit(b.ctx, dtq.Submission{Type: "job", IdempotencyKey: "dq"})
	require.NoError(t, err)
	b.waitStatus(t, res.TaskID, dtqtype.StatusDeadLettered)

	entries, err := b.insp.ListDLQ(b.ctx, nil)
	require.NoError(t, err)
	require.Empty(t, entries.NextCursor)
	require.Len(t, entries.Items, 1)
	require.Equal(t, "broken", entries.Items[0].Execution.ErrorMessage)
	require.JSONEq(t, `{}`, string(entries.Items[0].Payload))

	fail.Store("on", false)
	// Requeue while the worker is paused out, so the 409 window is visible.
	_, err = a.PauseQueue(b.ctx, "default", "test")
	require.NoError(t, err)
	ti, err := a.RequeueDLQ(b.ctx, res.TaskID, dtq.RequeueOptions{})
	require.NoError(t, err)
	require.Equal(t, dtqtype.StatusQueued, ti.Status)
	require.Equal(t, 1, ti.Attempt)
	require.Equal(t, 1, ti.PreviousAttempts)
	_, err = b.client.Submit(b.ctx, dtq.Submission{Type: "job", IdempotencyKey: "dq"})
	require.ErrorIs(t, err, dtq.ErrIdempotencyInProgress)
	_, err = a.ResumeQueue(b.ctx, "default", "test")
	require.NoError(t, err)
	b.waitStatus(t, res.TaskID, dtqtype.StatusSucceeded)
	again, err := b.client.Submit(b.ctx, dtq.Submission{Type: "job", IdempotencyKey: "dq"})
	require.NoError(t, err)
	require.True(t, again.Duplicate)
	_, err = a.RequeueDLQ(b.ctx, res.TaskID, dtq.RequeueOptions{})
	require.ErrorIs(t, err, dtq.ErrDLQEntryNotFound)
}

func TestDLQDiscardAndBulk(t *testing.T) {
	t.Parallel()
	b := setup(t, nil)
	a := b.admin(t)
	w := b.worker(t, func(c *dtq.WorkerConfig) { c.Queues = map[string]int{"q1": 1, "q2": 1} })
	w.HandleFunc("a", func(ctx context.Context, task *dtq.Task) (any, error) { return nil, dtq.Permanent(errors.New("a")) })
	w.HandleFunc("b", func(ctx context.Context, task *dtq.Task) (any, error) { return nil, dtq.Permanent(errors.New("b")) })
	stop := workertest.Run(t, w)
	var ids []string
	for i := range 30 {
		typ := []string{"a", "b"}[i%2]
		res, err := b.client.Submit(b.ctx, dtq.Submission{Type: typ, Queue: []string{"q1", "q2"}[i%3%2]})
		require.NoError(t, err)
		ids = append(ids, res.TaskID)
	}
	require.Eventually(t, func() bool {
		n := b.rc.ZCard(b.ctx, b.keys.DLQ("q1")).Val() + b.rc.ZCard(b.ctx, b.keys.DLQ("q2")).Val()
		return n == 30
	}, 20*time.Second, 10*time.Millisecond)

	// Paging through everything returns each entry once.
	seen := map[string]bool{}
	cursor, listCursor := "", ""
	for {
		page, err := b.insp.ListDLQ(b.ctx, &dtq.DLQListParams{Limit: 7, Cursor: cursor})
		require.NoError(t, err)
		for _, e := range page.Items {
			require.False(t, seen[e.ID])
			seen[e.ID] = true
		}
		if page.NextCursor == "" {
			break
		}
		cursor, listCursor = page.NextCursor, page.NextCursor
	}
	require.Len(t, seen, 30)
	_, err := a.RequeueDLQMatching(b.ctx, dtq.DLQFilter{Cursor: listCursor})
	require.ErrorIs(t, err, dtq.ErrInvalidCursor, "a list cursor does not continue a bulk action")

	ti, err := a.DiscardDLQ(b.ctx, ids[0])
	require.NoError(t, err)
	require.Equal(t, dtqtype.StatusDeadLettered, ti.Status)
	require.JSONEq(t, `{"discarded":true}`, string(ti.Metadata))
	require.Greater(t, b.rc.TTL(b.ctx, b.keys.Task(ti.Queue, ti.ID)).Val(), time.Duration(0))

	stop()
	r, err := a.RequeueDLQMatching(b.ctx, dtq.DLQFilter{Type: "b"})
	require.NoError(t, err)
	require.Nil(t, r.NextCursor)
	require.EqualValues(t, 15, r.Matched)
	require.EqualValues(t, 15, r.Processed)
	r, err = a.PurgeDLQMatching(b.ctx, dtq.DLQFilter{Queue: "q1"})
	require.NoError(t, err)
	require.Positive(t, r.Processed)
}

func TestQueueAdmin(t *testing.T) {
	t.Parallel()
	b := setup(t, nil)
	a := b.admin(t)
	for i := range 5 {
		_, err := b.client.Submit(b.ctx, dtq.Submission{Type: "x", Queue: "ops", Priority: new(i)})
		require.NoError(t, err)
	}
	later, err := b.client.Submit(b.ctx, dtq.Submission{Type: "x", Queue: "ops", Delay: time.Hour})
	require.NoError(t, err)
	qi, err := b.insp.GetQueue(b.ctx, "ops")
	require.NoError(t, err)
	require.EqualValues(t, 6, qi.Depth)
	require.EqualValues(t, 5, qi.ReadyTotal)
	require.EqualValues(t, 1, qi.Ready["p4"])
	require.EqualValues(t, 1, qi.Scheduled)
	_, err = b.insp.GetQueue(b.ctx, "never-used")
	require.ErrorIs(t, err, dtq.ErrQueueNotFound)

	changed, err := a.PauseQueue(b.ctx, "ops", "admin")
	require.NoError(t, err)
	require.True(t, changed)
	qi, err = b.insp.GetQueue(b.ctx, "ops")
	require.NoError(t, err)
	require.True(t, qi.Paused)

	ti, err := a.RunNow(b.ctx, later.TaskID)
	require.NoError(t, err)
	require.Equal(t, dtqtype.StatusQueued, ti.Status)
	_, err = a.RunNow(b.ctx, later.TaskID)
	require.ErrorIs(t, err, dtq.ErrTaskConflict)

	n, err := a.PurgeQueue(b.ctx, "ops")
	require.NoError(t, err)
	require.EqualValues(t, 6, n)
	require.Equal(t, "0", b.rc.Get(b.ctx, b.keys.Depth("ops")).Val())

	require.NoError(t, b.rc.Set(b.ctx, b.keys.Depth("ops"), 42, 0).Err())
	old, now, err := a.RecountQueue(b.ctx, "ops")
	require.NoError(t, err)
	require.EqualValues(t, 42, old)
	require.EqualValues(t, 0, now)

	require.NoError(t, a.DeleteTask(b.ctx, later.TaskID))
	_, err = b.insp.GetTask(b.ctx, later.TaskID)
	require.ErrorIs(t, err, dtq.ErrTaskNotFound)

	require.NoError(t, a.Audit(b.ctx, dtq.AuditRecord{Actor: "ops-key", Role: "admin", Action: "queue.purge", Target: "ops", RequestID: "r1"}))
	es, err := b.insp.ListAudit(b.ctx, &dtq.AuditListParams{Limit: 10})
	require.NoError(t, err)
	require.Len(t, es.Items, 1)
	require.Equal(t, "ops-key", es.Items[0].Actor)
}

func TestCancelSucceededTaskIsTerminal(t *testing.T) {
	t.Parallel()
	b := setup(t, nil)
	a := b.admin(t)
	w := b.worker(t, nil)
	w.HandleFunc("x", func(ctx context.Context, task *dtq.Task) (any, error) { return nil, nil })
	workertest.Run(t, w)
	res, err := b.client.Submit(b.ctx, dtq.Submission{Type: "x"})
	require.NoError(t, err)
	b.waitStatus(t, res.TaskID, dtqtype.StatusSucceeded)
	_, err = a.CancelTask(b.ctx, res.TaskID, "")
	require.ErrorIs(t, err, dtq.ErrTaskTerminal)
	var se *dtq.TaskStateError
	require.ErrorAs(t, err, &se)
	require.Equal(t, "succeeded", se.Status)
}
