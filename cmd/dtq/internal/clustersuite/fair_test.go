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

// TestKeyQueuesOnEveryMaster: on queues served by three masters, fairness
// with key_order, key_rate and key_concurrency runs every script of the key
// queues in the queue's own slot: submissions into key queues, the
// rotation (a small key passes a backlog), a parked key, a hand-back back
// to its first place, a purge of the key queues, and switching off (tasks
// back in the band streams).
func TestKeyQueuesOnEveryMaster(t *testing.T) {
	t.Parallel()
	c := sharedCluster(t)
	cc := c.Client(t)
	prefix := runPrefix("fair")
	ctx := context.Background()
	b := rdbtest.NewBodyChecker(t, cc, prefix)
	r := rdb.New(cc, prefix)
	f := rdbtest.New(r)
	as, ws := f.Admin, f.Settings
	now := time.Now()
	key := func(k string) func(*dtq.Submission) { return func(s *dtq.Submission) { s.ConcurrencyKey = k } }

	for _, q := range queuesOnEveryMaster(t, c, prefix) {
		t.Run(q, func(t *testing.T) {
			t.Parallel()
			require.NoError(t, r.EnsureGroups(ctx, q))
			_, err := r.SetLimits(ctx, q, &dtqtype.QueueLimits{Fairness: &dtqtype.Fairness{}, KeyOrder: "fifo",
				KeyRate: &dtqtype.RateLimit{Limit: 1000, Period: dtqtype.Duration(time.Second), Burst: 1000}, KeyConcurrency: 1})
			require.NoError(t, err)
			var big []string
			for i := range 5 {
				big = append(big, b.Submit(t, q, "big"+string(rune('a'+i)), key("big")))
			}
			small := b.Submit(t, q, "small", key("small"))

			cr, err := r.Claim(ctx, q, ws, 10, now, "c1-"+q)
			require.NoError(t, err)
			require.ElementsMatch(t, []string{big[0], small}, idsOf(cr.Tasks), "one per key: the small key passes the backlog")
			require.Equal(t, 1, cr.Held, "big is parked at its key_concurrency")
			var first rdb.ClaimedTask
			for _, ct := range cr.Tasks {
				if ct.ID == big[0] {
					first = ct
				}
			}
			require.NoError(t, r.HandBack(ctx, &rdb.FinishArgs{Queue: q, ID: first.ID, Attempt: first.Attempt,
				Priority: first.Priority, Now: now}, ws))
			cr, err = r.Claim(ctx, q, ws, 10, now, "c2-"+q)
			require.NoError(t, err)
			require.Equal(t, []string{big[0]}, idsOf(cr.Tasks), "the handed-back task is first of its key again")
			b.Require(t, big[1], "bigb", dtqtype.StatusQueued)

			qi, err := r.QueueInfo(ctx, q, now, 1)
			require.NoError(t, err)
			require.Equal(t, []dtqtype.KeyBacklog{{Key: "big", Queued: 4}}, qi.TopKeys)

			n, err := r.PurgeQueue(ctx, q, as, now)
			require.NoError(t, err)
			require.EqualValues(t, 4, n, "the key queues' tasks")
			b.Require(t, big[4], "bige", dtqtype.StatusCancelled)

			// Off: the key queues go back into the band streams.
			later := []string{b.Submit(t, q, "late1", key("late")), b.Submit(t, q, "late2", key("late"))}
			_, err = r.SetLimits(ctx, q, &dtqtype.QueueLimits{KeyConcurrency: 1})
			require.NoError(t, err)
			qi, err = r.QueueInfo(ctx, q, now, 1)
			require.NoError(t, err)
			require.EqualValues(t, 2, qi.ReadyTotal)
			require.Empty(t, qi.TopKeys)
			cr, err = r.Claim(ctx, q, ws, 10, now, "c3-"+q)
			require.NoError(t, err)
			require.Equal(t, later[:1], idsOf(cr.Tasks), "the first of its key; the second is held")
		})
	}
}

func idsOf(ts []rdb.ClaimedTask) []string {
	out := make([]string, len(ts))
	for i, ct := range ts {
		out[i] = ct.ID
	}
	return out
}
