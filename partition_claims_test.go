package dtq_test

import (
	"context"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/dtq-io/dtq"
	"github.com/dtq-io/dtq/dtqtype"
	"github.com/dtq-io/dtq/internal/rdb"
	"github.com/dtq-io/dtq/internal/redistest"
	"github.com/dtq-io/dtq/internal/workertest"
)

// startLog records the order in which a worker's handlers start.
type startLog struct {
	mu     sync.Mutex
	starts []string // task ids, in start order
}

func (l *startLog) add(id string) {
	l.mu.Lock()
	l.starts = append(l.starts, id)
	l.mu.Unlock()
}

// positions returns the index at which each of ids started (-1 for not
// yet).
func (l *startLog) positions(ids []string) []int {
	l.mu.Lock()
	defer l.mu.Unlock()
	out := make([]int, len(ids))
	for i, id := range ids {
		out[i] = -1
		for j, s := range l.starts {
			if s == id {
				out[i] = j
			}
		}
	}
	return out
}

// claimedSince counts the tasks that started at index from or later whose
// claim (started_at, Redis's time of the claim) is not before at, leaving
// out skip: what was claimed after at, not tasks claimed before it whose
// handlers began late.
func (l *startLog) claimedSince(t *testing.T, insp *dtq.Inspector, from int, at time.Time, skip map[string]bool) int {
	t.Helper()
	l.mu.Lock()
	ids := slices.Clone(l.starts[min(from, len(l.starts)):])
	l.mu.Unlock()
	n := 0
	for _, id := range ids {
		if skip[id] {
			continue
		}
		ti, err := insp.GetTask(context.Background(), id)
		require.NoError(t, err)
		if !ti.Execution.StartedAt.Before(at.Truncate(time.Millisecond)) {
			n++
		}
	}
	return n
}

// positionsUpTo returns the starts up to index last.
func (l *startLog) positionsUpTo(last int) []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return slices.Clone(l.starts[:last+1])
}

func (l *startLog) len() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return len(l.starts)
}

// partitionWorker starts a worker of concurrency slots on queue whose
// handlers take a moment and log their starts.
func partitionWorker(t *testing.T, b *bundle, queue string, concurrency int, log *startLog) {
	t.Helper()
	w, err := b.d.NewWorker(&dtq.WorkerConfig{Queues: map[string]int{queue: 1}, Concurrency: concurrency,
		Logger: slog.New(slog.DiscardHandler)})
	require.NoError(t, err)
	w.HandleFunc("job", func(ctx context.Context, task *dtq.Task) (any, error) {
		log.add(task.ID)
		time.Sleep(5 * time.Millisecond) // a task takes a moment: slots stay busy
		return nil, nil
	})
	workertest.Run(t, w)
}

// TestPartitionedPriority: 10 priority-9 tasks submitted behind a
// 10,000-task priority-0 backlog spread over 8 partitions all start before
// 2 × (workers × concurrency) further priority-0 starts.
func TestPartitionedPriority(t *testing.T) {
	t.Parallel()
	b := setup(t, func(c *dtq.ClientConfig) { c.MaxQueueDepth = 1 << 20 })
	_, err := b.admin(t).CreateQueue(b.ctx, "hot", &dtq.QueueOptions{Partitions: 8})
	require.NoError(t, err)
	backlog := make([]dtq.Submission, 10_000)
	for i := range backlog {
		backlog[i] = dtq.Submission{Queue: "hot", Type: "job", Priority: new(0)}
	}
	items, err := b.client.SubmitBatch(b.ctx, backlog)
	require.NoError(t, err)
	for _, it := range items {
		require.NoError(t, it.Err)
	}
	const concurrency = 8
	log := &startLog{}
	partitionWorker(t, b, "hot", concurrency, log)
	require.Eventually(t, func() bool { return log.len() >= 50 }, 30*time.Second, time.Millisecond, "the backlog never started")

	urgent := make([]dtq.Submission, 10)
	for i := range urgent {
		urgent[i] = dtq.Submission{Queue: "hot", Type: "job", Priority: new(9)}
	}
	mark := log.len()
	items, err = b.client.SubmitBatch(b.ctx, urgent)
	require.NoError(t, err)
	acked := time.Now()
	ids := make([]string, len(items))
	urgentIDs := map[string]bool{}
	for i, it := range items {
		require.NoError(t, it.Err)
		ids[i] = it.Result.TaskID
		urgentIDs[ids[i]] = true
	}
	var pos []int
	require.Eventually(t, func() bool {
		pos = log.positions(ids)
		for _, p := range pos {
			if p < 0 {
				return false
			}
		}
		return true
	}, 30*time.Second, time.Millisecond, "the priority-9 tasks never all started")
	last := 0
	for _, p := range pos {
		last = max(last, p)
	}
	// Priority-0 tasks claimed after the acknowledgement, before the last
	// priority-9 one started.
	further := (&startLog{starts: log.positionsUpTo(last)}).claimedSince(t, b.insp, mark, acked, urgentIDs)
	t.Logf("PRIORITY priority-0 starts before the last of 10 priority-9 starts: %d (bound %d)", further, 2*concurrency)
	require.LessOrEqual(t, further, 2*concurrency)
}

// TestPartitionedStarvation: with every slot busy on one partition's
// backlog, a task made ready on another partition starts within the next
// (workers × concurrency) starts.
func TestPartitionedStarvation(t *testing.T) {
	t.Parallel()
	b := setup(t, func(c *dtq.ClientConfig) { c.MaxQueueDepth = 1 << 20 })
	_, err := b.admin(t).CreateQueue(b.ctx, "hot", &dtq.QueueOptions{Partitions: 4})
	require.NoError(t, err)
	storage := rdb.New(b.rc, b.prefix)
	backlog := make([]dtq.Submission, 2_000)
	for i := range backlog {
		backlog[i] = dtq.Submission{Queue: "hot", Type: "job", ConcurrencyKey: "busy"}
	}
	items, err := b.client.SubmitBatch(b.ctx, backlog)
	require.NoError(t, err)
	busy, err := storage.TaskQueue(b.ctx, items[0].Result.TaskID)
	require.NoError(t, err)
	const concurrency = 8
	log := &startLog{}
	partitionWorker(t, b, "hot", concurrency, log)
	require.Eventually(t, func() bool { return log.len() >= 50 }, 30*time.Second, time.Millisecond, "the backlog never started")

	for i := 0; ; i++ {
		mark := log.len()
		res, err := b.client.Submit(b.ctx, dtq.Submission{Queue: "hot", Type: "job", ConcurrencyKey: fmt.Sprintf("other-%d", i)})
		require.NoError(t, err)
		acked := time.Now()
		part, err := storage.TaskQueue(b.ctx, res.TaskID)
		require.NoError(t, err)
		if part == busy {
			continue // same partition as the backlog: try another key
		}
		var pos []int
		require.Eventually(t, func() bool {
			pos = log.positions([]string{res.TaskID})
			return pos[0] >= 0
		}, 30*time.Second, time.Millisecond, "the other partition's task never started")
		// Tasks of the busy partition claimed after the acknowledgement,
		// before the other partition's task started.
		further := (&startLog{starts: log.positionsUpTo(pos[0])}).claimedSince(t, b.insp, mark, acked,
			map[string]bool{res.TaskID: true})
		t.Logf("STARVATION starts of the busy partition before the other partition's task: %d (bound %d)", further, concurrency)
		require.LessOrEqual(t, further, concurrency)
		return
	}
}

// TestPartitionedWorkerKeepsItsPool: an idle worker serving a queue of 64
// partitions blocks a read per partition on connections of its own
// (rdb.Waiter), never on the pool its claims and finalizes use, so that
// tasks submitted then run at once instead of queueing for a connection.
func TestPartitionedWorkerKeepsItsPool(t *testing.T) {
	t.Parallel()
	srv, err := redistest.Start() // a server of its own: its blocked clients are the worker's
	require.NoError(t, err)
	t.Cleanup(srv.Stop)
	rc := srv.Client(t)
	d := openPrefix(t, rc, "pool")
	admin, err := d.NewAdmin(nil)
	require.NoError(t, err)
	_, err = admin.CreateQueue(t.Context(), "wide", &dtq.QueueOptions{Partitions: 64})
	require.NoError(t, err)
	client, err := d.NewClient(nil)
	require.NoError(t, err)
	w, err := d.NewWorker(&dtq.WorkerConfig{Queues: map[string]int{"wide": 1}, Concurrency: 8,
		Logger: slog.New(slog.DiscardHandler)})
	require.NoError(t, err)
	w.HandleFunc("job", func(ctx context.Context, task *dtq.Task) (any, error) { return nil, nil })
	workertest.Run(t, w)
	require.Eventually(t, func() bool {
		_, blocked := redistest.ClientCounts(t, rc)
		return blocked >= 64
	}, 30*time.Second, 10*time.Millisecond, "a blocked read per partition")
	list, err := rc.ClientList(t.Context()).Result()
	require.NoError(t, err)
	blockedWaits, blockedOthers := 0, 0
	for line := range strings.SplitSeq(strings.TrimSpace(list), "\n") {
		fields := map[string]string{}
		for _, f := range strings.Fields(line) {
			k, v, _ := strings.Cut(f, "=")
			fields[k] = v
		}
		switch {
		case !strings.Contains(fields["flags"], "b"):
		case fields["name"] == rdb.WaiterName:
			blockedWaits++
		default:
			blockedOthers++
		}
	}
	require.GreaterOrEqual(t, blockedWaits, 64, "a blocked read per partition, on the waits' connections")
	// The one other blocked read is the workflow relay's watch, on a
	// connection of its own.
	require.LessOrEqual(t, blockedOthers, 1, "blocked reads on the pool the worker's claims and finalizes use")

	var ids []string
	for range 64 {
		res, err := client.Submit(t.Context(), dtq.Submission{Queue: "wide", Type: "job"})
		require.NoError(t, err)
		ids = append(ids, res.TaskID)
	}
	insp := d.Inspector()
	for _, id := range ids {
		ti, err := insp.WaitTask(t.Context(), id, 30*time.Second)
		require.NoError(t, err)
		require.Equal(t, dtqtype.StatusSucceeded, ti.Status)
	}
}
