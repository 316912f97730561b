package clustersuite_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/dtq-io/dtq/dtqtype"
	"github.com/dtq-io/dtq/internal/rdb"
)

// TestIngestResentAndSettledOnEveryMaster: on queues served by three
// masters, an ingest call sent again answers what its first run answered,
// and settling a call whose replies were lost answers Created for the task
// it made and Absent for the one it did not, after which that call, should
// it still arrive, writes nothing. Every key the scripts touch (task hash,
// ended and settle markers, idempotency record) must be in the queue's
// slot for this to run at all on a Cluster.
func TestIngestResentAndSettledOnEveryMaster(t *testing.T) {
	t.Parallel()
	c := sharedCluster(t)
	cc := c.Client(t)
	prefix := runPrefix("ingest")
	ctx := context.Background()
	r := rdb.New(cc, prefix)
	keys := r.Keys()
	opt := rdb.IngestOptions{MaxDepth: 100, EventsMaxLen: 1000, RecentCap: 1000}

	for _, q := range queuesOnEveryMaster(t, c, prefix) {
		t.Run(q, func(t *testing.T) {
			t.Parallel()
			now := time.Now()
			num, err := r.QueueNumber(ctx, q)
			require.NoError(t, err)
			task := func(key string) rdb.NewTask {
				return rdb.NewTask{ID: rdb.NewTaskID(num, now), Type: "echo", Payload: []byte(`{}`), Priority: 5,
					MaxAttempts: 3, TimeoutMS: 30000, IdempotencyKey: key, AvailableAt: now.UnixMilli(),
					Metadata: []byte("{}"), Fingerprint: "fp-" + key, IdemTTL: 3600, CreatedAt: now.UnixMilli()}
			}
			landed, lostKeyless, lostKeyed := task(""), task(""), task("k")
			created := rdb.IngestResult{Outcome: rdb.Created, TaskID: landed.ID, Status: dtqtype.StatusQueued}

			first, err := r.Ingest(ctx, q, now, opt, []rdb.NewTask{landed})
			require.NoError(t, err)
			require.Equal(t, []rdb.IngestResult{created}, first)
			again, err := r.Ingest(ctx, q, now, opt, []rdb.NewTask{landed})
			require.NoError(t, err)
			require.Equal(t, first, again, "a resent call answers what its first run answered")

			settled, err := r.SettleIngest(ctx, q, now, opt, []rdb.NewTask{landed, lostKeyless, lostKeyed})
			require.NoError(t, err)
			require.Equal(t, []rdb.IngestResult{created,
				{Outcome: rdb.Absent, TaskID: lostKeyless.ID}, {Outcome: rdb.Absent, TaskID: lostKeyed.ID}}, settled)

			// The lost calls arrive after all: they write nothing.
			_, err = r.Ingest(ctx, q, now, opt, []rdb.NewTask{lostKeyless, lostKeyed})
			require.NoError(t, err)
			for _, id := range []string{lostKeyless.ID, lostKeyed.ID} {
				n, err := cc.Exists(ctx, keys.Task(q, id)).Result()
				require.NoError(t, err)
				require.Zero(t, n, "a settled task must never be created")
			}
			entries := int64(0)
			for band := range 10 {
				l, err := cc.XLen(ctx, keys.Stream(q, band)).Result()
				require.NoError(t, err)
				entries += l
			}
			require.EqualValues(t, 1, entries, "one band entry: the landed task's")
			depth, err := cc.Get(ctx, keys.Depth(q)).Int()
			require.NoError(t, err)
			require.Equal(t, 1, depth)
		})
	}
}

// TestLostRegistryRebuiltAcrossMasters: queues on three masters keep their
// tasks while the registry (on a master of its own slot) is lost; a
// process that never cached them finds each task by its id at once, the
// registry rebuilt from the queues' number keys read on every master.
func TestLostRegistryRebuiltAcrossMasters(t *testing.T) {
	t.Parallel()
	c := sharedCluster(t)
	cc := c.Client(t)
	prefix := runPrefix("registry")
	ctx := context.Background()
	r := rdb.New(cc, prefix)
	opt := rdb.IngestOptions{MaxDepth: 100, EventsMaxLen: 1000, RecentCap: 1000}
	ids := map[string]string{}
	for _, q := range queuesOnEveryMaster(t, c, prefix) {
		now := time.Now()
		num, err := r.QueueNumber(ctx, q)
		require.NoError(t, err)
		nt := rdb.NewTask{ID: rdb.NewTaskID(num, now), Type: "echo", Payload: []byte(`{}`), Priority: 5,
			MaxAttempts: 3, TimeoutMS: 30000, AvailableAt: now.UnixMilli(), Metadata: []byte("{}"), CreatedAt: now.UnixMilli()}
		_, err = r.Ingest(ctx, q, now, opt, []rdb.NewTask{nt})
		require.NoError(t, err)
		ids[q] = nt.ID
	}
	require.NoError(t, cc.Del(ctx, r.Keys().Queues()).Err())

	fresh := rdb.New(cc, prefix)
	for q, id := range ids {
		got, err := fresh.TaskQueue(ctx, id)
		require.NoError(t, err)
		require.Equal(t, q, got, "task %s", id)
	}
	n, err := cc.HLen(ctx, r.Keys().Queues()).Result()
	require.NoError(t, err)
	require.GreaterOrEqual(t, n, int64(2*len(ids)), "every queue is back in the registry, both ways")
}
