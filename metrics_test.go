package dtq_test

import (
	"context"
	"errors"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/dtq-io/dtq"
	"github.com/dtq-io/dtq/dtqtype"
	"github.com/dtq-io/dtq/internal/workertest"
)

// recorder is a dtq.Observer that keeps what it is told.
type recorder struct {
	mu       sync.Mutex
	queues   []string
	types    []string
	started  []dtq.TaskStart
	finished []dtq.TaskEnd
}

func (r *recorder) Serving(queues, types []string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.queues, r.types = queues, types
}

func (r *recorder) TaskStarted(s dtq.TaskStart) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.started = append(r.started, s)
}

func (r *recorder) TaskFinished(e dtq.TaskEnd) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.finished = append(r.finished, e)
}

func (r *recorder) Throttled(string, string, int) {}
func (r *recorder) FinalizeRetried(string)        {}

// outcomes counts the finished attempts by outcome.
func (r *recorder) outcomes() map[string]int {
	r.mu.Lock()
	defer r.mu.Unlock()
	out := map[string]int{}
	for _, e := range r.finished {
		out[e.Outcome]++
	}
	return out
}

// TestWorkerTellsItsObserver: the Observer hears the queues and types
// served, each start and each attempt's outcome with its task's fields.
func TestWorkerTellsItsObserver(t *testing.T) {
	t.Parallel()
	b := setup(t, nil)
	rec := &recorder{}
	w := b.worker(t, func(c *dtq.WorkerConfig) { c.Observer = rec })
	w.HandleFunc("ok", func(ctx context.Context, task *dtq.Task) (any, error) { return nil, nil })
	w.HandleFunc("bad", func(ctx context.Context, task *dtq.Task) (any, error) { return nil, dtq.Permanent(errors.New("no")) })
	workertest.Run(t, w)
	for range 3 {
		_, err := b.client.Submit(b.ctx, dtq.Submission{Type: "ok"})
		require.NoError(t, err)
	}
	bad, err := b.client.Submit(b.ctx, dtq.Submission{Type: "bad"})
	require.NoError(t, err)
	b.waitStatus(t, bad.TaskID, dtqtype.StatusDeadLettered)
	require.Eventually(t, func() bool {
		o := rec.outcomes()
		return o["succeeded"] == 3 && o["dead_lettered"] == 1
	}, 10*time.Second, 10*time.Millisecond)

	rec.mu.Lock()
	defer rec.mu.Unlock()
	require.Equal(t, []string{"default"}, rec.queues)
	require.True(t, slices.Contains(rec.types, "ok") && slices.Contains(rec.types, "bad"), "%v", rec.types)
	require.Len(t, rec.started, 4)
	for _, s := range rec.started {
		require.Equal(t, "default", s.Queue)
		require.Equal(t, 1, s.Attempt)
		require.GreaterOrEqual(t, s.Waited, time.Duration(0))
	}
	for _, e := range rec.finished {
		require.Contains(t, []string{"ok", "bad"}, e.Type)
		require.GreaterOrEqual(t, e.SinceCreated, e.Took)
		require.NotEmpty(t, e.ID)
		if e.Type == "bad" {
			require.Equal(t, bad.TaskID, e.ID)
		}
	}
}
