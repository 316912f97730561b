package dtq_test

import (
	"context"
	"encoding/json"
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
	"github.com/dtq-io/dtq/internal/rdb"
	"github.com/dtq-io/dtq/internal/workertest"
)

// TestPartitionedQueueCycle: a queue created with 4 partitions takes keyed
// and keyless tasks into all of them (one key's tasks always into one), a
// worker naming the queue runs every task with key_concurrency 1 never
// overlapping, and reads, listings, pause, limits and deletion treat the
// partitions as one queue.
func TestPartitionedQueueCycle(t *testing.T) {
	t.Parallel()
	b := setup(t, nil)
	admin := b.admin(t)
	const queue = "hot"
	created, err := admin.CreateQueue(b.ctx, queue, &dtq.QueueOptions{Partitions: 4})
	require.NoError(t, err)
	require.True(t, created)
	created, err = admin.CreateQueue(b.ctx, queue, &dtq.QueueOptions{Partitions: 4})
	require.NoError(t, err)
	require.False(t, created, "created once")
	created, err = admin.CreateQueue(b.ctx, queue, nil)
	require.NoError(t, err)
	require.False(t, created, "a create without partitions leaves them")
	_, err = admin.CreateQueue(b.ctx, queue, &dtq.QueueOptions{Partitions: 8})
	var pc *dtq.PartitionsConflictError
	require.ErrorAs(t, err, &pc)
	require.Equal(t, 4, pc.Has)
	n, err := admin.QueuePartitions(b.ctx, queue)
	require.NoError(t, err)
	require.Equal(t, 4, n)

	// A queue already used with one partition is never split under its
	// producers.
	_, err = b.client.Submit(b.ctx, dtq.Submission{Queue: "plain", Type: "job"})
	require.NoError(t, err)
	_, err = admin.CreateQueue(b.ctx, "plain", &dtq.QueueOptions{Partitions: 2})
	require.ErrorIs(t, err, dtq.ErrPartitionsConflict)

	// key_concurrency 1 holds on every partition (a key's tasks are in one);
	// concurrency 4 is split 1 per partition.
	require.NoError(t, admin.SetLimits(b.ctx, queue, dtqtype.QueueLimits{KeyConcurrency: 1, Concurrency: 4}))
	lim, err := b.insp.GetLimits(b.ctx, queue)
	require.NoError(t, err)
	require.Equal(t, 4, lim.Concurrency, "the queue's concurrency reads as the sum of its partitions' shares")
	require.ErrorContains(t, admin.SetLimits(b.ctx, queue, dtqtype.QueueLimits{Concurrency: 3}), "partitions")

	var mu sync.Mutex
	running := map[string]int{}
	var overlap, ran atomic.Int64
	w, err := b.d.NewWorker(&dtq.WorkerConfig{Queues: map[string]int{queue: 1}, Concurrency: 8,
		Logger: slog.New(slog.DiscardHandler)})
	require.NoError(t, err)
	w.HandleFunc("job", func(ctx context.Context, task *dtq.Task) (any, error) {
		if task.Queue != queue {
			return nil, fmt.Errorf("task names queue %q", task.Queue)
		}
		var p struct{ Key string }
		if err := json.Unmarshal(task.Payload, &p); err != nil {
			return nil, err
		}
		mu.Lock()
		running[p.Key]++
		if p.Key != "" && running[p.Key] > 1 {
			overlap.Add(1)
		}
		mu.Unlock()
		time.Sleep(2 * time.Millisecond) // a handler that takes a moment, so that overlaps could happen
		mu.Lock()
		running[p.Key]--
		mu.Unlock()
		ran.Add(1)
		return p.Key, nil
	})

	partOf := map[string]string{} // key -> the partition of its tasks
	ids := map[string]string{}    // id -> key
	for i := range 120 {
		key := ""
		if i%4 != 0 {
			key = fmt.Sprintf("k%d", i%13)
		}
		res, err := b.client.Submit(b.ctx, dtq.Submission{Queue: queue, Type: "job", ConcurrencyKey: key,
			Payload: map[string]any{"key": key}})
		require.NoError(t, err)
		require.Equal(t, queue, res.Task.Queue)
		ids[res.TaskID] = key
	}
	storage := rdb.New(b.rc, b.prefix)
	used := map[string]bool{}
	for id, key := range ids {
		part, err := storage.TaskQueue(b.ctx, id)
		require.NoError(t, err)
		q, _ := rdb.PartitionOf(part)
		require.Equal(t, queue, q)
		used[part] = true
		if key == "" {
			continue
		}
		if had, ok := partOf[key]; ok {
			require.Equal(t, had, part, "every task of key %s in one partition", key)
		}
		partOf[key] = part
	}
	require.Len(t, used, 4, "tasks in every partition")

	qi, err := b.insp.GetQueue(b.ctx, queue)
	require.NoError(t, err)
	require.Equal(t, int64(120), qi.Depth)
	sc, err := b.insp.Scaling(b.ctx, []string{queue}, nil)
	require.NoError(t, err)
	require.Equal(t, int64(120), sc[0].Ready, "the autoscaling signal counts every partition")
	require.Positive(t, sc[0].DesiredWorkers)
	require.Len(t, qi.Partitions, 4)
	var sum int64
	for k, p := range qi.Partitions {
		require.Equal(t, k, p.Partition)
		require.Positive(t, p.Depth)
		sum += p.Depth
	}
	require.Equal(t, int64(120), sum)
	list, err := b.insp.ListQueues(b.ctx, nil)
	require.NoError(t, err)
	var names []string
	for _, q := range list.Items {
		names = append(names, q.Name)
	}
	require.Equal(t, []string{"hot", "plain"}, names, "partitions are not listed as queues")
	sizes, err := b.insp.QueueSizes(b.ctx, nil)
	require.NoError(t, err)
	require.Len(t, sizes, 2)
	require.Equal(t, int64(120), sizes[0].Depth)

	page, err := b.insp.ListTasks(b.ctx, &dtq.TaskListParams{Queue: queue, Limit: 200})
	require.NoError(t, err)
	require.Len(t, page.Items, 120, "a listing of the queue merges its partitions")

	workertest.Run(t, w)
	for id := range ids {
		ti, err := b.insp.WaitTask(b.ctx, id, 20*time.Second)
		require.NoError(t, err)
		require.Equal(t, dtqtype.StatusSucceeded, ti.Status, id)
		require.Equal(t, queue, ti.Queue)
	}
	require.Zero(t, overlap.Load(), "key_concurrency 1 never overlaps")

	// Pause reaches every partition.
	changed, err := admin.PauseQueue(b.ctx, queue, "test")
	require.NoError(t, err)
	require.True(t, changed)
	qi, err = b.insp.GetQueue(b.ctx, queue)
	require.NoError(t, err)
	require.True(t, qi.Paused)
	for _, part := range qi.Partitions {
		require.Zero(t, part.Depth)
	}
	_, err = admin.ResumeQueue(b.ctx, queue, "test")
	require.NoError(t, err)

	// Deleting the queue deletes its partitions; the name is free again.
	require.NoError(t, admin.DeleteQueue(b.ctx, queue))
	_, err = admin.QueuePartitions(b.ctx, queue)
	require.ErrorIs(t, err, dtq.ErrQueueNotFound)
	all, err := storage.Queues(b.ctx)
	require.NoError(t, err)
	require.Equal(t, []string{"plain"}, all)
}

// TestPartitionedQueueIdempotency: an idempotency key repeats within its
// partition key's partition (a duplicate), and a repeat with another
// partition key is new work at P > 1 (docs/partitions.md).
func TestPartitionedQueueIdempotency(t *testing.T) {
	t.Parallel()
	b := setup(t, nil)
	_, err := b.admin(t).CreateQueue(b.ctx, "orders", &dtq.QueueOptions{Partitions: 8})
	require.NoError(t, err)
	first, err := b.client.Submit(b.ctx, dtq.Submission{Queue: "orders", Type: "job", IdempotencyKey: "order-1"})
	require.NoError(t, err)
	_, err = b.client.Submit(b.ctx, dtq.Submission{Queue: "orders", Type: "job", IdempotencyKey: "order-1"})
	var ic *dtq.IdempotencyConflictError
	require.ErrorAs(t, err, &ic)
	require.ErrorIs(t, err, dtq.ErrIdempotencyInProgress)
	require.Equal(t, first.TaskID, ic.TaskID, "the repeat finds the key's task in its partition")
	_, err = b.client.Submit(b.ctx, dtq.Submission{Queue: "orders", Type: "job", IdempotencyKey: "order-1", Payload: map[string]any{"x": 1}})
	require.ErrorIs(t, err, dtq.ErrIdempotencyKeyMismatch, "a key's records are in its partition")

	// The same idempotency key with other concurrency keys: new work in
	// each partition it reaches first, a mismatch after (docs/partitions.md).
	fresh, parts := 0, map[string]bool{}
	storage := rdb.New(b.rc, b.prefix)
	for i := range 32 {
		res, err := b.client.Submit(b.ctx, dtq.Submission{Queue: "orders", Type: "job", IdempotencyKey: "order-2",
			ConcurrencyKey: fmt.Sprintf("c%d", i)})
		if errors.Is(err, dtq.ErrIdempotencyKeyMismatch) {
			// The concurrency key is part of the work: another one in a
			// partition the key reached already is other work.
			continue
		}
		require.NoError(t, err)
		fresh++
		part, err := storage.TaskQueue(b.ctx, res.TaskID)
		require.NoError(t, err)
		require.False(t, parts[part], "one task per partition for the key")
		parts[part] = true
	}
	require.Greater(t, fresh, 1, "a repeat with another partition key is new work")
}

// TestPartitionedQueueTaskActions: max_depth applies per partition at the
// queue's bound shared; actions by task id (run now, cancel) and the DLQ's
// listing and requeue of a queue reach tasks of every partition.
func TestPartitionedQueueTaskActions(t *testing.T) {
	t.Parallel()
	b := setup(t, func(c *dtq.ClientConfig) { c.MaxQueueDepth = 8 })
	admin := b.admin(t)
	_, err := admin.CreateQueue(b.ctx, "hot", &dtq.QueueOptions{Partitions: 4})
	require.NoError(t, err)
	storage := rdb.New(b.rc, b.prefix)

	// max_depth 8 over 4 partitions: 2 a partition; the third task of one
	// key's partition is refused, naming the partition.
	for i := range 2 {
		_, err := b.client.Submit(b.ctx, dtq.Submission{Queue: "hot", Type: "job", ConcurrencyKey: "k", Payload: map[string]any{"i": i}})
		require.NoError(t, err)
	}
	_, err = b.client.Submit(b.ctx, dtq.Submission{Queue: "hot", Type: "job", ConcurrencyKey: "k"})
	var full *dtq.QueueFullError
	require.ErrorAs(t, err, &full)
	require.NotNil(t, full.Partition)
	require.Equal(t, int64(2), full.Limit)
	require.Contains(t, full.Error(), fmt.Sprintf("partition %d", *full.Partition))
	_, err = admin.PurgeQueue(b.ctx, "hot")
	require.NoError(t, err)

	// Run now and cancel by id, on tasks of partitions 1 and up.
	moved := 0
	for i := range 4 {
		res, err := b.client.Submit(b.ctx, dtq.Submission{Queue: "hot", Type: "job", Delay: time.Hour, Payload: map[string]any{"late": i}})
		require.NoError(t, err)
		part, err := storage.TaskQueue(b.ctx, res.TaskID)
		require.NoError(t, err)
		if !rdb.IsPartition(part) {
			continue
		}
		ti, err := admin.RunNow(b.ctx, res.TaskID)
		require.NoError(t, err)
		require.Equal(t, dtqtype.StatusQueued, ti.Status)
		cr, err := admin.CancelTask(b.ctx, res.TaskID, "test")
		require.NoError(t, err)
		require.Equal(t, dtqtype.StatusCancelled, cr.Task.Status)
		moved++
	}
	require.Positive(t, moved, "round-robin reached a partition past 0")

	// Dead letters of every partition are listed and requeued by queue.
	var fail atomic.Bool
	fail.Store(true)
	w, err := b.d.NewWorker(&dtq.WorkerConfig{Queues: map[string]int{"hot": 1}, Concurrency: 4,
		Logger: slog.New(slog.DiscardHandler)})
	require.NoError(t, err)
	w.HandleFunc("job", func(ctx context.Context, task *dtq.Task) (any, error) {
		if fail.Load() {
			return nil, errors.New("not yet")
		}
		return "ok", nil
	})
	workertest.Run(t, w)
	var ids []string
	for range 4 {
		res, err := b.client.Submit(b.ctx, dtq.Submission{Queue: "hot", Type: "job", MaxAttempts: 1})
		require.NoError(t, err)
		ids = append(ids, res.TaskID)
	}
	for _, id := range ids {
		ti, err := b.insp.WaitTask(b.ctx, id, 20*time.Second)
		require.NoError(t, err)
		require.Equal(t, dtqtype.StatusDeadLettered, ti.Status)
	}
	page, err := b.insp.ListDLQ(b.ctx, &dtq.DLQListParams{Queue: "hot", Limit: 2})
	require.NoError(t, err)
	require.Len(t, page.Items, 2)
	require.NotEmpty(t, page.NextCursor)
	next, err := b.insp.ListDLQ(b.ctx, &dtq.DLQListParams{Queue: "hot", Limit: 10, Cursor: page.NextCursor})
	require.NoError(t, err)
	require.Len(t, next.Items, 2, "the cursor pages over every partition")
	fail.Store(false)
	bulk, err := admin.RequeueDLQMatching(b.ctx, dtq.DLQFilter{Queue: "hot"})
	require.NoError(t, err)
	require.Equal(t, int64(4), bulk.Processed)
	for _, id := range ids {
		ti, err := b.insp.WaitTask(b.ctx, id, 20*time.Second)
		require.NoError(t, err)
		require.Equal(t, dtqtype.StatusSucceeded, ti.Status)
	}
}
