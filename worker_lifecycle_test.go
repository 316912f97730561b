package dtq_test

import (
	"context"
	"encoding/json"
	"errors"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"

	"github.com/dtq-io/dtq"
	"github.com/dtq-io/dtq/dtqtype"
	"github.com/dtq-io/dtq/internal/workertest"
)

func TestFencingLostLeaseWritesNothing(t *testing.T) {
	t.Parallel()
	b := setup(t, nil)
	release := make(chan struct{})
	started := make(chan struct{}, 1)
	rec := &recorder{}
	slow := b.worker(t, func(c *dtq.WorkerConfig) {
		c.Observer = rec
		c.WorkerID = "slow"
		c.Concurrency = 1 // busy with attempt 1: it cannot claim the task again if the peer requeues it
		c.VisibilityTimeout = 30 * time.Second
		c.HeartbeatInterval = 10 * time.Second // no renewal during the test
	})
	slow.HandleFunc("job", func(ctx context.Context, task *dtq.Task) (any, error) {
		started <- struct{}{}
		<-release
		return "slow result", nil
	})
	stopSlow := workertest.Run(t, slow)
	res, err := b.client.Submit(b.ctx, dtq.Submission{Type: "job", IdempotencyKey: "fence"})
	require.NoError(t, err)
	<-started

	peer := b.workerOf(t, b.open(t, lateClock), func(c *dtq.WorkerConfig) { c.WorkerID = "peer" })
	peer.HandleFunc("job", func(ctx context.Context, task *dtq.Task) (any, error) { return "peer result", nil })
	workertest.Run(t, peer)
	ti := b.waitStatus(t, res.TaskID, dtqtype.StatusSucceeded)
	require.Equal(t, "peer", ti.Execution.WorkerID)

	close(release) // the slow worker now tries to finalize attempt 1
	require.Eventually(t, func() bool {
		return rec.outcomes()["lease_lost"] == 1
	}, 10*time.Second, 10*time.Millisecond)
	stopSlow()
	ti, err = b.insp.GetTask(b.ctx, res.TaskID)
	require.NoError(t, err)
	require.Equal(t, "peer", ti.Execution.WorkerID)
	require.Equal(t, 2, ti.Attempt)
	require.JSONEq(t, `"peer result"`, string(ti.Result))
	n := 0
	for _, e := range b.events(t, "default", res.TaskID) {
		if e == "TASK_SUCCEEDED" {
			n++
		}
	}
	require.Equal(t, 1, n)
}

func TestDrainFinishesShortTaskAndHandsBackLongOne(t *testing.T) {
	t.Parallel()
	b := setup(t, nil)
	started := make(chan string, 2)
	w := b.worker(t, func(c *dtq.WorkerConfig) { c.WorkerID = "draining"; c.DrainTimeout = 300 * time.Millisecond })
	w.HandleFunc("short", func(ctx context.Context, task *dtq.Task) (any, error) {
		started <- "short"
		time.Sleep(100 * time.Millisecond) // the work itself, not a wait for async work
		return "done", nil
	})
	w.HandleFunc("long", func(ctx context.Context, task *dtq.Task) (any, error) {
		started <- "long"
		<-ctx.Done()
		return nil, ctx.Err()
	})
	stop := workertest.Run(t, w)
	long, err := b.client.Submit(b.ctx, dtq.Submission{Type: "long"})
	require.NoError(t, err)
	short, err := b.client.Submit(b.ctx, dtq.Submission{Type: "short"})
	require.NoError(t, err)
	<-started
	<-started
	stop()

	require.Equal(t, dtqtype.StatusSucceeded, b.waitStatus(t, short.TaskID, dtqtype.StatusSucceeded).Status)
	ti := b.waitStatus(t, long.TaskID, dtqtype.StatusQueued)
	require.Equal(t, 1, ti.Attempt)
	require.Equal(t, []string{"TASK_QUEUED", "TASK_STARTED", "TASK_QUEUED"}, b.events(t, "default", long.TaskID))

	// A peer starts it at once, with the same attempt.
	peer := b.worker(t, func(c *dtq.WorkerConfig) { c.WorkerID = "peer" })
	var attempt int
	peer.HandleFunc("long", func(ctx context.Context, task *dtq.Task) (any, error) { attempt = task.Attempt; return nil, nil })
	peer.HandleFunc("short", func(ctx context.Context, task *dtq.Task) (any, error) { return nil, nil })
	workertest.Run(t, peer)
	b.waitStatus(t, long.TaskID, dtqtype.StatusSucceeded)
	require.Equal(t, 1, attempt)
}

func TestCancelRequestStopsRunningHandler(t *testing.T) {
	t.Parallel()
	b := setup(t, nil)
	started := make(chan struct{}, 1)
	w := b.worker(t, func(c *dtq.WorkerConfig) { c.HeartbeatInterval = time.Second })
	w.HandleFunc("sleep", func(ctx context.Context, task *dtq.Task) (any, error) {
		started <- struct{}{}
		<-ctx.Done()
		return nil, context.Cause(ctx)
	})
	workertest.Run(t, w)
	res, err := b.client.Submit(b.ctx, dtq.Submission{Type: "sleep", IdempotencyKey: "c1"})
	require.NoError(t, err)
	<-started
	// What the cancel API does for a running task: flag, then publish.
	require.NoError(t, b.rc.HSet(b.ctx, b.keys.Task("default", res.TaskID), "cancel_requested", "1").Err())
	require.NoError(t, b.rc.Publish(b.ctx, b.keys.CancelChannel("default"), res.TaskID).Err())
	ti := b.waitStatus(t, res.TaskID, dtqtype.StatusCancelled)
	require.Equal(t, "Cancelled", ti.Execution.ErrorClass)
	require.NotContains(t, b.events(t, "default", res.TaskID), "TASK_SUCCEEDED")
	require.Equal(t, "failed", mustRecord(t, b, "default", "c1").State)
}

func TestCancelFlagSeenAtLeaseRenewal(t *testing.T) {
	t.Parallel()
	b := setup(t, nil)
	started := make(chan struct{}, 1)
	w := b.worker(t, nil)
	w.HandleFunc("sleep", func(ctx context.Context, task *dtq.Task) (any, error) {
		started <- struct{}{}
		<-ctx.Done()
		return nil, ctx.Err()
	})
	workertest.Run(t, w)
	res, err := b.client.Submit(b.ctx, dtq.Submission{Type: "sleep"})
	require.NoError(t, err)
	<-started
	// The pub/sub message is lost: only the flag is set.
	require.NoError(t, b.rc.HSet(b.ctx, b.keys.Task("default", res.TaskID), "cancel_requested", "1").Err())
	b.waitStatus(t, res.TaskID, dtqtype.StatusCancelled)
}

func TestStrictPriorityAcrossBands(t *testing.T) {
	t.Parallel()
	b := setup(t, nil)
	for _, p := range []int{0, 3, 9, 1, 7, 5, 2, 8, 4, 6} {
		_, err := b.client.Submit(b.ctx, dtq.Submission{Type: "p", Priority: new(p), Payload: map[string]int{"p": p}})
		require.NoError(t, err)
	}
	var mu sync.Mutex
	var order []int
	w := b.worker(t, func(c *dtq.WorkerConfig) { c.Concurrency = 1 })
	w.HandleFunc("p", func(ctx context.Context, task *dtq.Task) (any, error) {
		var v struct{ P int }
		_ = json.Unmarshal(task.Payload, &v)
		mu.Lock()
		order = append(order, v.P)
		mu.Unlock()
		return nil, nil
	})
	workertest.Run(t, w)
	require.Eventually(t, func() bool { mu.Lock(); defer mu.Unlock(); return len(order) == 10 }, 20*time.Second, 10*time.Millisecond)
	require.Equal(t, []int{9, 8, 7, 6, 5, 4, 3, 2, 1, 0}, order)
}

func TestDelayedTaskStartsNoEarlierThanDue(t *testing.T) {
	t.Parallel()
	b := setup(t, nil)
	startedAt := make(chan time.Time, 1)
	w := b.worker(t, nil)
	w.HandleFunc("later", func(ctx context.Context, task *dtq.Task) (any, error) { startedAt <- time.Now(); return nil, nil })
	workertest.Run(t, w)
	res, err := b.client.Submit(b.ctx, dtq.Submission{Type: "later", Delay: 400 * time.Millisecond})
	require.NoError(t, err)
	require.Equal(t, dtqtype.StatusPending, res.Task.Status)
	at := <-startedAt
	require.False(t, at.Before(res.Task.AvailableAt.Time), "started %v before due %v", at, res.Task.AvailableAt)
	b.waitStatus(t, res.TaskID, dtqtype.StatusSucceeded)
	require.Equal(t, []string{"TASK_PENDING", "TASK_QUEUED", "TASK_STARTED", "TASK_SUCCEEDED"}, b.events(t, "default", res.TaskID))
}

func TestTimeoutRetriesThenDeadLetters(t *testing.T) {
	t.Parallel()
	b := setup(t, nil)
	w := b.worker(t, nil)
	w.HandleFunc("stuck", func(ctx context.Context, task *dtq.Task) (any, error) {
		<-ctx.Done()
		return nil, ctx.Err()
	})
	workertest.Run(t, w)
	res, err := b.client.Submit(b.ctx, dtq.Submission{Type: "stuck", Timeout: 50 * time.Millisecond, MaxAttempts: 2})
	require.NoError(t, err)
	ti := b.waitStatus(t, res.TaskID, dtqtype.StatusDeadLettered)
	require.Equal(t, "Timeout", ti.Execution.ErrorClass)
	require.Equal(t, 2, ti.Attempt)
	require.Equal(t, "Timeout", ti.Attempts[0].ErrorClass)
}

func TestExpiredTaskIsNotRun(t *testing.T) {
	t.Parallel()
	b := setup(t, nil)
	res, err := b.client.Submit(b.ctx, dtq.Submission{Type: "x", TTL: time.Second, IdempotencyKey: "exp"})
	require.NoError(t, err)
	ran := make(chan struct{}, 1)
	w := b.workerOf(t, b.open(t, lateClock), nil)
	w.HandleFunc("x", func(ctx context.Context, task *dtq.Task) (any, error) { ran <- struct{}{}; return nil, nil })
	workertest.Run(t, w)
	b.waitStatus(t, res.TaskID, dtqtype.StatusExpired)
	require.Empty(t, ran)
	require.Equal(t, []string{"TASK_QUEUED", "TASK_EXPIRED"}, b.events(t, "default", res.TaskID))
	require.Equal(t, "0", b.rc.Get(b.ctx, b.keys.Depth("default")).Val())
	require.Zero(t, b.rc.XLen(b.ctx, b.keys.Stream("default", 5)).Val())
	again, err := b.client.Submit(b.ctx, dtq.Submission{Type: "x", TTL: time.Second, IdempotencyKey: "exp"})
	require.NoError(t, err)
	require.True(t, again.Duplicate)
	require.Equal(t, dtqtype.StatusExpired, again.Task.Status)
}

func TestDuplicateWorkerIDRefused(t *testing.T) {
	t.Parallel()
	b := setup(t, nil)
	w1 := b.worker(t, func(c *dtq.WorkerConfig) { c.WorkerID = "same" })
	workertest.Run(t, w1)
	require.Eventually(t, func() bool {
		return b.rc.HGet(b.ctx, b.keys.Worker("same"), "status").Val() == "ready"
	}, 10*time.Second, 10*time.Millisecond)
	rec := b.rc.HGetAll(b.ctx, b.keys.Worker("same")).Val()
	for _, f := range []string{"hostname", "pid", "version", "queues", "concurrency", "heartbeat_interval_ms", "started_at", "last_heartbeat", "in_flight", "processed"} {
		require.Contains(t, rec, f)
	}
	w2 := b.worker(t, func(c *dtq.WorkerConfig) { c.WorkerID = "same" })
	err := w2.Run(context.Background())
	require.ErrorIs(t, err, dtq.ErrWorkerIDInUse)
}

// TestStopWhileStartingIsNoError: a worker stopped before it finished
// starting (a Ctrl-C during start) returns nil, not the cancelled start's
// error, and registers nothing.
func TestStopWhileStartingIsNoError(t *testing.T) {
	t.Parallel()
	b := setup(t, nil)
	w := b.worker(t, func(c *dtq.WorkerConfig) { c.WorkerID = "stopped-early" })
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	require.NoError(t, w.Run(ctx))
	require.Zero(t, b.rc.Exists(b.ctx, b.keys.Worker("stopped-early")).Val())
}

func TestRetryKeepsRecordProcessingAndForeignRecordUntouched(t *testing.T) {
	t.Parallel()
	b := setup(t, nil)
	gate := make(chan struct{})
	w := b.worker(t, func(c *dtq.WorkerConfig) { c.RetryBaseDelay = time.Hour; c.RetryMaxDelay = time.Hour })
	w.HandleFunc("fails", func(ctx context.Context, task *dtq.Task) (any, error) { return nil, errors.New("try later") })
	w.HandleFunc("ok", func(ctx context.Context, task *dtq.Task) (any, error) { <-gate; return nil, nil })
	workertest.Run(t, w)

	res, err := b.client.Submit(b.ctx, dtq.Submission{Type: "fails", IdempotencyKey: "r1"})
	require.NoError(t, err)
	b.waitStatus(t, res.TaskID, dtqtype.StatusRetrying)
	require.Equal(t, res.TaskID, b.rc.Get(b.ctx, b.keys.Idempotency("default", "r1")).Val())
	_, err = b.client.Submit(b.ctx, dtq.Submission{Type: "fails", IdempotencyKey: "r1"})
	require.ErrorIs(t, err, dtq.ErrIdempotencyInProgress)

	// A record that now belongs to another task is never overwritten.
	ok, err := b.client.Submit(b.ctx, dtq.Submission{Type: "ok", IdempotencyKey: "r2"})
	require.NoError(t, err)
	foreign := "someone-else"
	key := b.keys.Idempotency("default", "r2")
	require.NoError(t, b.rc.Set(b.ctx, key, foreign, time.Hour).Err())
	close(gate)
	b.waitStatus(t, ok.TaskID, dtqtype.StatusSucceeded)
	require.Equal(t, foreign, b.rc.Get(b.ctx, key).Val())
}

// TestCompletionLeavesRecordAlone: the record is the task id; finishing
// the task changes neither it nor its TTL (its state is the task's status).
func TestCompletionLeavesRecordAlone(t *testing.T) {
	t.Parallel()
	b := setup(t, nil)
	gate := make(chan struct{})
	w := b.worker(t, nil)
	w.HandleFunc("ok", func(ctx context.Context, task *dtq.Task) (any, error) { <-gate; return nil, nil })
	workertest.Run(t, w)
	res, err := b.client.Submit(b.ctx, dtq.Submission{Type: "ok", IdempotencyKey: "t1"})
	require.NoError(t, err)
	key := b.keys.Idempotency("default", "t1")
	require.NoError(t, b.rc.Expire(b.ctx, key, 500*time.Second).Err()) // a marker TTL
	close(gate)
	b.waitStatus(t, res.TaskID, dtqtype.StatusSucceeded)
	require.Equal(t, res.TaskID, b.rc.Get(b.ctx, key).Val())
	ttl := b.rc.TTL(b.ctx, key).Val()
	require.LessOrEqual(t, ttl, 500*time.Second)
	require.Greater(t, ttl, 400*time.Second)
	again, err := b.client.Submit(b.ctx, dtq.Submission{Type: "ok", IdempotencyKey: "t1"})
	require.NoError(t, err)
	require.True(t, again.Duplicate)
}

func TestDLQDisabledEndsFailed(t *testing.T) {
	t.Parallel()
	b := setup(t, nil)
	w := b.workerOf(t, b.open(t, func(c *dtq.DeploymentConfig) { c.DisableDLQ = true }), nil)
	w.HandleFunc("bad", func(ctx context.Context, task *dtq.Task) (any, error) { return nil, dtq.Permanent(errors.New("no")) })
	workertest.Run(t, w)
	res, err := b.client.Submit(b.ctx, dtq.Submission{Type: "bad", IdempotencyKey: "f1"})
	require.NoError(t, err)
	b.waitStatus(t, res.TaskID, dtqtype.StatusFailed)
	require.Zero(t, b.rc.ZCard(b.ctx, b.keys.DLQ("default")).Val())
	require.Equal(t, "failed", mustRecord(t, b, "default", "f1").State)
	require.Equal(t, []string{"TASK_QUEUED", "TASK_STARTED", "TASK_FAILED"}, b.events(t, "default", res.TaskID))
}

func TestDuplicateStreamEntryIsAbsorbed(t *testing.T) {
	t.Parallel()
	b := setup(t, nil)
	res, err := b.client.Submit(b.ctx, dtq.Submission{Type: "once"})
	require.NoError(t, err)
	// A stray second entry for the same task, as a manual edit or a replayed
	// write could leave behind.
	require.NoError(t, b.rc.XAdd(b.ctx, &redis.XAddArgs{Stream: b.keys.Stream("default", 5),
		Values: []any{"t", res.TaskID, "a", "1"}}).Err())
	var runs atomic.Int64
	w := b.worker(t, nil)
	w.HandleFunc("once", func(ctx context.Context, task *dtq.Task) (any, error) { runs.Add(1); return nil, nil })
	workertest.Run(t, w)
	b.waitStatus(t, res.TaskID, dtqtype.StatusSucceeded)
	require.Eventually(t, func() bool {
		return slices.Contains(b.events(t, "default", res.TaskID), "TASK_DUPLICATE_ABSORBED")
	}, 10*time.Second, 10*time.Millisecond)
	require.EqualValues(t, 1, runs.Load())
	require.Eventually(t, func() bool { return b.rc.XLen(b.ctx, b.keys.Stream("default", 5)).Val() == 0 }, 10*time.Second, 10*time.Millisecond)
}
