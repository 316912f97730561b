package dtq_test

import (
	"context"
	"fmt"
	"log/slog"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/dtq-io/dtq"
	"github.com/dtq-io/dtq/internal/redistest"
	"github.com/dtq-io/dtq/internal/workertest"
)

// TestWorkerStartsAndDrainsAtMaxmemory: a worker restarted while Redis is
// at maxmemory (noeviction) starts even though Redis refuses to create
// consumer groups and to write its record, and drains the backlog; its
// record is written once memory frees.
func TestWorkerStartsAndDrainsAtMaxmemory(t *testing.T) {
	t.Parallel()
	srv, err := redistest.Start("--maxmemory-policy", "noeviction")
	require.NoError(t, err)
	t.Cleanup(srv.Stop)
	rc := srv.Client(t)
	ctx := context.Background()
	d, err := dtq.Open(rc, &dtq.DeploymentConfig{KeyPrefix: "oom", SucceededRetention: dtq.NoRetention})
	require.NoError(t, err)
	client, err := d.NewClient(nil)
	require.NoError(t, err)
	insp := d.Inspector()
	var ran atomic.Int64
	newWorker := func(id string) *dtq.Worker {
		w, err := d.NewWorker(&dtq.WorkerConfig{WorkerID: id, Concurrency: 4,
			HeartbeatInterval: 100 * time.Millisecond, Logger: slog.New(slog.DiscardHandler)})
		require.NoError(t, err)
		w.HandleFunc("job", func(context.Context, *dtq.Task) (any, error) { ran.Add(1); return nil, nil })
		return w
	}
	// A first worker made the groups, then stopped.
	first, err := client.Submit(ctx, dtq.Submission{Type: "job"})
	require.NoError(t, err)
	stop := workertest.Run(t, newWorker("first"))
	require.Eventually(t, func() bool { return ran.Load() == 1 }, 20*time.Second, 10*time.Millisecond)
	stop()
	_, err = insp.GetTask(ctx, first.TaskID)
	require.ErrorIs(t, err, dtq.ErrTaskNotFound, "deleted as it finished")

	const backlog = 20
	for i := range backlog {
		_, err := client.Submit(ctx, dtq.Submission{Type: "job", Payload: map[string]any{"n": i}})
		require.NoError(t, err)
	}
	// Redis is full.
	require.NoError(t, rc.ConfigSet(ctx, "maxmemory", "1").Err())
	t.Cleanup(func() { rc.ConfigSet(ctx, "maxmemory", "0") })
	_, err = client.Submit(ctx, dtq.Submission{Type: "job"})
	require.Error(t, err, "Redis refuses writes")

	w := newWorker("restarted")
	done := make(chan error, 1)
	wctx, cancel := context.WithCancel(ctx)
	t.Cleanup(cancel)
	go func() { done <- w.Run(wctx) }()
	var exited atomic.Pointer[error]
	require.Eventually(t, func() bool {
		select {
		case err := <-done:
			exited.Store(&err)
			return true
		default:
		}
		return ran.Load() == 1+backlog
	}, 30*time.Second, 10*time.Millisecond, "the backlog drained")
	if e := exited.Load(); e != nil {
		t.Fatalf("the worker exited at maxmemory: %v", *e)
	}

	// Memory back: the worker's record is written by a heartbeat.
	require.NoError(t, rc.ConfigSet(ctx, "maxmemory", "0").Err())
	require.Eventually(t, func() bool {
		wi, err := insp.GetWorker(ctx, "restarted")
		return err == nil && wi.Live
	}, 20*time.Second, 10*time.Millisecond)
	cancel()
	require.NoError(t, <-done)
	sizes, err := insp.QueueSizes(ctx, []string{"default"})
	require.NoError(t, err)
	require.Len(t, sizes, 1)
	require.Zero(t, sizes[0].Depth, fmt.Sprint(sizes[0]))
}
