package dtq_test

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/dtq-io/dtq"
	"github.com/dtq-io/dtq/dtqtype"
	"github.com/dtq-io/dtq/internal/workertest"
)

func (b *bundle) worker(t *testing.T, mod func(*dtq.WorkerConfig)) *dtq.Worker {
	t.Helper()
	return b.workerOf(t, b.d, mod)
}

// lateClock sets a clock a minute ahead: a process past the leases that
// the others' workers hold.
func lateClock(c *dtq.DeploymentConfig) {
	c.Clock = func() time.Time { return time.Now().Add(time.Minute) }
}

// workerOf is worker on d, a Deployment of b's (see bundle.open).
func (b *bundle) workerOf(t *testing.T, d *dtq.Deployment, mod func(*dtq.WorkerConfig)) *dtq.Worker {
	t.Helper()
	cfg := &dtq.WorkerConfig{Concurrency: 8, VisibilityTimeout: 3 * time.Second,
		HeartbeatInterval: time.Second, RetryBaseDelay: 10 * time.Millisecond, RetryMaxDelay: 50 * time.Millisecond,
		DrainTimeout: 5 * time.Second, Logger: slog.New(slog.DiscardHandler)}
	if mod != nil {
		mod(cfg)
	}
	w, err := d.NewWorker(cfg)
	require.NoError(t, err)
	return w
}

// waitStatus polls until the task reaches want or the deadline passes.
func (b *bundle) waitStatus(t *testing.T, id string, want dtqtype.Status) *dtqtype.TaskInfo {
	t.Helper()
	var last *dtqtype.TaskInfo
	require.Eventually(t, func() bool {
		ti, err := b.insp.GetTask(b.ctx, id)
		require.NoError(t, err)
		last = ti
		return ti.Status == want
	}, 20*time.Second, 10*time.Millisecond, "task %s never reached %s", id, want)
	return last
}

func (b *bundle) events(t *testing.T, queue, id string) []string {
	t.Helper()
	msgs, err := b.rc.XRange(b.ctx, b.keys.Events(queue), "-", "+").Result()
	require.NoError(t, err)
	var out []string
	for _, m := range msgs {
		if m.Values["task_id"] == id {
			out = append(out, m.Values["type"].(string))
		}
	}
	return out
}

func TestWorkerRunsTaskToSuccess(t *testing.T) {
	t.Parallel()
	b := setup(t, nil)
	w := b.worker(t, nil)
	w.HandleFunc("echo", func(ctx context.Context, task *dtq.Task) (any, error) { return task.Payload, nil })
	workertest.Run(t, w)
	res, err := b.client.Submit(b.ctx, dtq.Submission{Type: "echo", Payload: map[string]any{"hello": "world"}, IdempotencyKey: "k1"})
	require.NoError(t, err)
	ti := b.waitStatus(t, res.TaskID, dtqtype.StatusSucceeded)
	require.JSONEq(t, `{"hello":"world"}`, string(ti.Result))
	require.Equal(t, w.ID(), ti.Execution.WorkerID)
	require.Len(t, ti.Attempts, 1)
	require.Equal(t, "succeeded", ti.Attempts[0].Outcome)
	require.Equal(t, []string{"TASK_QUEUED", "TASK_STARTED", "TASK_SUCCEEDED"}, b.events(t, "default", res.TaskID))
	require.Equal(t, "0", b.rc.Get(b.ctx, b.keys.Depth("default")).Val())
	require.Greater(t, b.rc.TTL(b.ctx, b.keys.Task("default", res.TaskID)).Val(), time.Duration(0))
	// The idempotency record is completed now: a resubmit replays.
	again, err := b.client.Submit(b.ctx, dtq.Submission{Type: "echo", Payload: map[string]any{"hello": "world"}, IdempotencyKey: "k1"})
	require.NoError(t, err)
	require.True(t, again.Duplicate)
	require.Equal(t, res.TaskID, again.TaskID)
	require.Equal(t, dtqtype.StatusSucceeded, again.Task.Status)
	// Nothing left in the streams.
	for p := 0; p < 10; p++ {
		require.Zero(t, b.rc.XLen(b.ctx, b.keys.Stream("default", p)).Val())
	}
}

// TestWorkerRecreatesLostGroups removes a band's stream and its consumer
// group under a running worker (a Redis that lost its data, an operator's
// DEL): the next task there is still run once the worker has recreated the
// group.
func TestWorkerRecreatesLostGroups(t *testing.T) {
	t.Parallel()
	b := setup(t, nil)
	w := b.worker(t, nil)
	w.HandleFunc("echo", func(ctx context.Context, task *dtq.Task) (any, error) { return nil, nil })
	workertest.Run(t, w)
	first, err := b.client.Submit(b.ctx, dtq.Submission{Type: "echo"})
	require.NoError(t, err)
	b.waitStatus(t, first.TaskID, dtqtype.StatusSucceeded)

	require.NoError(t, b.rc.Del(b.ctx, b.keys.Stream("default", 5)).Err())
	res, err := b.client.Submit(b.ctx, dtq.Submission{Type: "echo"})
	require.NoError(t, err)
	b.waitStatus(t, res.TaskID, dtqtype.StatusSucceeded)
}

func TestWorkerFlakySucceedsOnThirdAttempt(t *testing.T) {
	t.Parallel()
	b := setup(t, nil)
	w := b.worker(t, nil)
	w.HandleFunc("flaky", func(ctx context.Context, task *dtq.Task) (any, error) {
		if task.Attempt <= 2 {
			return nil, fmt.Errorf("flaky failure %d", task.Attempt)
		}
		return map[string]int{"attempt": task.Attempt}, nil
	})
	workertest.Run(t, w)
	res, err := b.client.Submit(b.ctx, dtq.Submission{Type: "flaky"})
	require.NoError(t, err)
	ti := b.waitStatus(t, res.TaskID, dtqtype.StatusSucceeded)
	require.Equal(t, 3, ti.Attempt)
	require.Len(t, ti.Attempts, 3)
	require.Equal(t, []string{"TASK_QUEUED", "TASK_STARTED", "TASK_RETRY_SCHEDULED", "TASK_RETRIED", "TASK_STARTED",
		"TASK_RETRY_SCHEDULED", "TASK_RETRIED", "TASK_STARTED", "TASK_SUCCEEDED"}, b.events(t, "default", res.TaskID))
}

func TestWorkerDeadLettersAfterAttempts(t *testing.T) {
	t.Parallel()
	b := setup(t, nil)
	w := b.worker(t, nil)
	w.HandleFunc("always_fail", func(ctx context.Context, task *dtq.Task) (any, error) {
		return nil, errors.New("boom")
	})
	w.HandleFunc("perm", func(ctx context.Context, task *dtq.Task) (any, error) {
		return nil, dtq.Permanent(errors.New("bad input"))
	})
	w.HandleFunc("panics", func(ctx context.Context, task *dtq.Task) (any, error) { panic("oh no") })
	workertest.Run(t, w)
	a, err := b.client.Submit(b.ctx, dtq.Submission{Type: "always_fail", MaxAttempts: 2, IdempotencyKey: "af"})
	require.NoError(t, err)
	p, err := b.client.Submit(b.ctx, dtq.Submission{Type: "perm", MaxAttempts: 3})
	require.NoError(t, err)
	pn, err := b.client.Submit(b.ctx, dtq.Submission{Type: "panics", MaxAttempts: 3})
	require.NoError(t, err)
	u, err := b.client.Submit(b.ctx, dtq.Submission{Type: "nobody_handles_this", MaxAttempts: 2})
	require.NoError(t, err)

	ti := b.waitStatus(t, a.TaskID, dtqtype.StatusDeadLettered)
	require.Equal(t, "boom", ti.Execution.ErrorMessage)
	require.Equal(t, []string{"TASK_QUEUED", "TASK_STARTED", "TASK_RETRY_SCHEDULED", "TASK_RETRIED", "TASK_STARTED",
		"TASK_DEAD_LETTERED"}, b.events(t, "default", a.TaskID))
	require.Equal(t, 2, ti.Attempt)
	ti = b.waitStatus(t, p.TaskID, dtqtype.StatusDeadLettered)
	require.Equal(t, 1, ti.Attempt)
	require.False(t, *ti.Execution.Retryable)
	ti = b.waitStatus(t, pn.TaskID, dtqtype.StatusDeadLettered)
	require.Equal(t, "Panic", ti.Execution.ErrorClass)
	ti = b.waitStatus(t, u.TaskID, dtqtype.StatusDeadLettered)
	require.Equal(t, "UnknownTaskType", ti.Execution.ErrorClass)

	n, err := b.rc.ZCard(b.ctx, b.keys.DLQ("default")).Result()
	require.NoError(t, err)
	require.EqualValues(t, 4, n)
	// Record failed → resubmit replays the dead-lettered task.
	again, err := b.client.Submit(b.ctx, dtq.Submission{Type: "always_fail", MaxAttempts: 2, IdempotencyKey: "af"})
	require.NoError(t, err)
	require.True(t, again.Duplicate)
	require.Equal(t, dtqtype.StatusDeadLettered, again.Task.Status)
}

func TestWorkerManyTasksExactlyOnce(t *testing.T) {
	t.Parallel()
	b := setup(t, nil)
	const n = 2000
	var mu sync.Mutex
	counts := map[string]int{}
	var total atomic.Int64
	for range 2 {
		w := b.worker(t, func(c *dtq.WorkerConfig) { c.Concurrency = 16 })
		w.HandleFunc("count", func(ctx context.Context, task *dtq.Task) (any, error) {
			mu.Lock()
			counts[task.ID]++
			mu.Unlock()
			total.Add(1)
			return nil, nil
		})
		workertest.Run(t, w)
	}
	subs := make([]dtq.Submission, n)
	for i := range subs {
		subs[i] = dtq.Submission{Type: "count", Priority: new(i % 10)}
	}
	items, err := b.client.SubmitBatch(b.ctx, subs)
	require.NoError(t, err)
	for _, it := range items {
		require.NoError(t, it.Err)
	}
	require.Eventually(t, func() bool { return b.rc.Get(b.ctx, b.keys.Depth("default")).Val() == "0" }, 60*time.Second, 20*time.Millisecond)
	require.EqualValues(t, n, total.Load())
	mu.Lock()
	require.Len(t, counts, n)
	for id, c := range counts {
		require.Equal(t, 1, c, id)
	}
	mu.Unlock()
	for p := 0; p < 10; p++ {
		require.Zero(t, b.rc.XLen(b.ctx, b.keys.Stream("default", p)).Val())
	}
	require.Zero(t, b.rc.ZCard(b.ctx, b.keys.Lease("default")).Val())
}
