package rdb_test

import (
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"

	"github.com/dtq-io/dtq/dtqtype"
	"github.com/dtq-io/dtq/internal/rdb"
)

// claimBeat registers (or refreshes) HTTP worker id under API key.
func claimBeat(b *bundle, id, key string, mode string, now time.Time) error {
	return b.r.RemoteWorkerBeat(b.ctx, &rdb.RemoteWorker{ID: id, Key: key, Mode: mode, LeaseEnd: now.Add(time.Minute),
		Interval: 10 * time.Second, EventsMax: 100}, now)
}

// TestWorkerRecordsAreBounded: past DTQ_MAX_WORKERS_PER_KEY a key's new
// worker id is refused, past DTQ_MAX_WORKERS any new id is, with nothing
// written; known ids keep beating; a refusal sent again answers the same;
// records silent past the eviction horizon make room and are deleted.
func TestWorkerRecordsAreBounded(t *testing.T) {
	t.Parallel()
	b := setup(t)
	b.r.SetWorkerBounds(rdb.WorkerBounds{Max: 5, MaxPerKey: 3})
	now := b.now
	for i := range 3 {
		require.NoError(t, claimBeat(b, fmt.Sprintf("a%d", i), "key-a", rdb.RemoteClaim, now))
	}
	var full *rdb.TooManyWorkersError
	for range 2 { // sent twice: the same answer
		err := claimBeat(b, "a3", "key-a", rdb.RemoteClaim, now.Add(time.Second))
		require.ErrorAs(t, err, &full)
		require.Equal(t, "key", full.Scope)
		require.EqualValues(t, 3, full.Count)
		require.EqualValues(t, 3, full.Limit)
		require.Equal(t, rdb.WorkerEvictAfter-time.Second, full.RetryAfter, "until the oldest may be evicted")
	}
	require.Zero(t, b.c.Exists(b.ctx, b.keys.Worker("a3")).Val(), "a refused worker writes no record")
	// Known ids keep beating, claiming and finishing.
	require.NoError(t, claimBeat(b, "a0", "key-a", rdb.RemoteClaim, now.Add(time.Second)))
	require.NoError(t, claimBeat(b, "a1", "key-a", rdb.RemoteBeat, now.Add(time.Second)))
	// A renewal of an id the index lost is never refused: it holds leases.
	require.NoError(t, claimBeat(b, "a9", "key-a", rdb.RemoteBeat, now.Add(time.Second)))

	// The total bound: key-b has room of its own, the deployment has not
	// (a0..a2, a9, b0 = 5).
	require.NoError(t, claimBeat(b, "b0", "key-b", rdb.RemoteClaim, now))
	err := claimBeat(b, "b1", "key-b", rdb.RemoteClaim, now)
	require.ErrorAs(t, err, &full)
	require.Equal(t, "total", full.Scope)
	require.EqualValues(t, 5, full.Limit)
	// A Go worker's start is held to the total bound too; its beat is not.
	err = b.r.WorkerStart(b.ctx, "go-1", now, time.Minute, 100, []any{"instance", "i1", "status", "running"})
	require.ErrorAs(t, err, &full)
	require.Zero(t, b.c.Exists(b.ctx, b.keys.Worker("go-1")).Val())
	require.EqualValues(t, 5, b.c.ZCard(b.ctx, b.keys.Workers()).Val())

	// Two hours on, a0 and a2 are silent (the rest beat): a new id evicts
	// them and their records are deleted.
	later := now.Add(2 * time.Hour)
	for _, id := range []string{"a1", "a9"} {
		require.NoError(t, claimBeat(b, id, "key-a", rdb.RemoteBeat, later))
	}
	require.NoError(t, claimBeat(b, "b0", "key-b", rdb.RemoteBeat, later))
	require.NoError(t, claimBeat(b, "b1", "key-b", rdb.RemoteClaim, later))
	require.Zero(t, b.c.Exists(b.ctx, b.keys.Worker("a0"), b.keys.Worker("a2")).Val(), "evicted records are deleted")
	require.EqualValues(t, 1, b.c.Exists(b.ctx, b.keys.Worker("a1")).Val())
	ids := b.c.ZRange(b.ctx, b.keys.Workers(), 0, -1).Val()
	require.ElementsMatch(t, []string{"a1", "a9", "b0", "b1"}, ids)
	require.LessOrEqual(t, b.c.ZCard(b.ctx, b.keys.WorkersOfKey("key-a")).Val(), int64(3))
}

// TestWorkerRecordsExpire: a worker record lives 24 hours past its last
// heartbeat (key TTL), and the index drops it at the next registration.
func TestWorkerRecordsExpire(t *testing.T) {
	t.Parallel()
	b := setup(t)
	require.NoError(t, claimBeat(b, "old", "k", rdb.RemoteClaim, b.now))
	ttl := b.c.TTL(b.ctx, b.keys.Worker("old")).Val()
	require.InDelta(t, (24 * time.Hour).Seconds(), ttl.Seconds(), 60)
	require.NoError(t, claimBeat(b, "new", "k", rdb.RemoteClaim, b.now.Add(25*time.Hour)))
	require.Equal(t, []string{"new"}, b.c.ZRange(b.ctx, b.keys.Workers(), 0, -1).Val())
	require.Equal(t, []string{"new"}, b.c.ZRange(b.ctx, b.keys.WorkersOfKey("k"), 0, -1).Val())
}

// TestListWorkersPage: pages in id order cover every worker once, however
// the workers beat between pages; the last page has no cursor.
func TestListWorkersPage(t *testing.T) {
	t.Parallel()
	b := setup(t)
	var want []string
	for i := range 7 {
		id := fmt.Sprintf("w%02d", i)
		want = append(want, id)
		require.NoError(t, claimBeat(b, id, "", rdb.RemoteClaim, b.now.Add(time.Duration(i)*time.Millisecond)))
	}
	var got []string
	after := ""
	for range 10 {
		page, err := b.r.ListWorkers(b.ctx, b.now, &dtqtype.WorkerListParams{Cursor: after, Limit: 3})
		require.NoError(t, err)
		require.LessOrEqual(t, len(page.Items), 3)
		for _, w := range page.Items {
			got = append(got, w.ID)
		}
		// A beat between pages moves the worker in heartbeat order, not here.
		require.NoError(t, claimBeat(b, "w06", "", rdb.RemoteBeat, b.now.Add(time.Minute)))
		if page.NextCursor == "" {
			break
		}
		after = page.NextCursor
	}
	require.Equal(t, want, got)
}

// TestEnsureGroupsAtMaxmemory: Redis at maxmemory (noeviction) refuses
// XGROUP CREATE even for a group that exists; EnsureGroups then finds the
// group and succeeds, so a restarted worker can start and drain. A group
// that is missing fails with an OOM error the caller retries on.
func TestEnsureGroupsAtMaxmemory(t *testing.T) {
	t.Parallel()
	r, c := privateRDB(t, "--maxmemory-policy", "noeviction")
	ctx := t.Context()
	require.NoError(t, r.EnsureGroups(ctx, "q"))
	require.NoError(t, c.ConfigSet(ctx, "maxmemory", "1").Err())
	t.Cleanup(func() { c.ConfigSet(ctx, "maxmemory", "0") })
	// Redis does refuse the create at this point.
	err := c.XGroupCreateMkStream(ctx, r.Keys().Stream("q", 0), rdb.Group, "0").Err()
	require.True(t, redis.IsOOMError(err), "%v", err)

	require.NoError(t, r.EnsureGroups(ctx, "q"), "existing groups count as created")
	err = r.EnsureGroups(ctx, "fresh")
	require.Error(t, err)
	require.True(t, redis.IsOOMError(err), "%v", err)
	require.False(t, errors.Is(err, rdb.ErrNotFound))
}
