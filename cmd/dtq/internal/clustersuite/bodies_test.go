package clustersuite_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/dtq-io/dtq"
	"github.com/dtq-io/dtq/dtqtype"
	"github.com/dtq-io/dtq/internal/rdb"
	"github.com/dtq-io/dtq/internal/rdbtest"
)

// TestQueuedBodiesOnEveryMaster: on queues served by three masters, every
// script that takes a queued task's band entry away without starting it
// (cancel, purge, the expiry sweep, expiry at claim, a key-concurrency
// hold) moves the entry's payload and metadata into the task hash, on the
// queue's own master; the started task carries its own.
func TestQueuedBodiesOnEveryMaster(t *testing.T) {
	t.Parallel()
	c := sharedCluster(t)
	cc := c.Client(t)
	prefix := runPrefix("bodies")
	ctx := context.Background()
	b := rdbtest.NewBodyChecker(t, cc, prefix)
	r := rdb.New(cc, prefix)
	f := rdbtest.New(r)
	as, ws := f.Admin, f.Settings
	later := time.Now().Add(time.Hour) // past every expiry below

	for _, q := range queuesOnEveryMaster(t, c, prefix) {
		t.Run(q, func(t *testing.T) {
			t.Parallel()
			submit := func(name string, mod func(*dtq.Submission)) string { return b.Submit(t, q, name, mod) }

			cancelled := submit("cancelled", nil)
			out, _, err := r.CancelTask(ctx, q, cancelled, as, time.Now(), "test")
			require.NoError(t, err)
			require.Equal(t, "cancelled", out)

			swept := submit("swept", rdbtest.Expiring)
			_, err = r.SweepExpired(ctx, q, ws, later)
			require.NoError(t, err)

			purged := submit("purged", func(s *dtq.Submission) { s.Priority = new(0) })
			n, err := r.PurgeQueue(ctx, q, as, time.Now())
			require.NoError(t, err)
			require.Equal(t, int64(1), n)

			require.NoError(t, r.EnsureGroups(ctx, q))
			_, err = r.SetLimits(ctx, q, &dtqtype.QueueLimits{KeyConcurrency: 1})
			require.NoError(t, err)
			overdue := submit("overdue", rdbtest.Expiring)
			started := submit("started", rdbtest.Keyed)
			held := submit("held", rdbtest.Keyed)
			cr, err := r.Claim(ctx, q, ws, 10, later, "n-"+q)
			require.NoError(t, err)
			require.Len(t, cr.Tasks, 1)
			require.Equal(t, started, cr.Tasks[0].ID)
			require.Contains(t, string(cr.Tasks[0].Payload), `"name":"started"`)
			require.Equal(t, 1, cr.Held)

			b.Require(t, cancelled, "cancelled", dtqtype.StatusCancelled)
			b.Require(t, swept, "swept", dtqtype.StatusExpired)
			b.Require(t, purged, "purged", dtqtype.StatusCancelled)
			b.Require(t, overdue, "overdue", dtqtype.StatusExpired)
			b.Require(t, started, "started", dtqtype.StatusRunning)
			b.Require(t, held, "held", dtqtype.StatusQueued)
			b.RequireNoBandEntries(t, q)
		})
	}
}
