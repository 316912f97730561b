package rdb

import (
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"
)

// TestBandStreamsHoldOnlyUndelivered checks that a claim trims what it
// delivered, so that XLEN is the ready count, finalizes only ack, and a
// recount also trims entries an older claim delivered without trimming.
func TestBandStreamsHoldOnlyUndelivered(t *testing.T) {
	t.Parallel()
	b := newTestRDB(t)
	ctx, r := b.ctx, b.r
	require.NoError(t, r.EnsureGroups(ctx, "q"))
	stream := b.keys.Stream("q", 5)
	tasks := make([]NewTask, 4)
	for i := range tasks {
		tasks[i] = b.task(t, "q", "")
	}
	b.ingest(t, "q", tasks...)

	// An older version's claim: delivered, leased, not trimmed.
	old := tasks[0]
	require.NoError(t, b.c.XReadGroup(ctx, &redis.XReadGroupArgs{Group: Group, Consumer: "old-worker",
		Streams: []string{stream, ">"}, Count: 1, Block: -1}).Err())
	require.NoError(t, b.c.ZAdd(ctx, b.keys.Lease("q"), redis.Z{Score: float64(b.now.Add(time.Hour).UnixMilli()), Member: old.ID}).Err())
	require.EqualValues(t, 4, b.c.XLen(ctx, stream).Val())

	// Recount trims it and counts 3 undelivered + 1 leased.
	require.NoError(t, b.c.Set(ctx, b.keys.Depth("q"), 99, 0).Err())
	before, after, err := r.Recount(ctx, "q")
	require.NoError(t, err)
	require.EqualValues(t, 99, before)
	require.EqualValues(t, 4, after)
	require.EqualValues(t, 3, b.c.XLen(ctx, stream).Val())

	ws := &WorkerSettings{WorkerID: "w1", Lease: 30 * time.Second, EventsMaxLen: 1000,
		SucceededRetention: time.Hour, FailedRetention: time.Hour, ResultRetention: time.Hour}
	cr, err := r.Claim(ctx, "q", ws, 2, b.now, "")
	require.NoError(t, err)
	require.Len(t, cr.Tasks, 2)
	require.Equal(t, tasks[1].ID, cr.Tasks[0].ID)
	require.EqualValues(t, 1, b.c.XLen(ctx, stream).Val(), "the claim trimmed what it delivered")

	qs, err := r.QueueInfo(ctx, "q", b.now, 1)
	require.NoError(t, err)
	require.EqualValues(t, 1, qs.Ready["p5"])
	require.EqualValues(t, 3, qs.Pending, "the old worker's entry and the two claimed")
	require.EqualValues(t, 3, qs.Running)

	errs, err := r.FinishSucceeded(ctx, "q", ws, b.now, []Success{{ID: cr.Tasks[0].ID, Attempt: cr.Tasks[0].Attempt}})
	require.NoError(t, err)
	require.NoError(t, errs[0])
	qs, err = r.QueueInfo(ctx, "q", b.now, 1)
	require.NoError(t, err)
	require.EqualValues(t, 2, qs.Pending, "acked though its data was trimmed")
	require.EqualValues(t, 1, qs.Ready["p5"])
	require.EqualValues(t, 3, qs.Depth)
}
