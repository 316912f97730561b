package rdb

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/dtq-io/dtq/dtqtype"
)

// ingestN ingests n queued tasks of queue with concurrency key ck.
func (b *testRDB) ingestN(t *testing.T, queue string, n int, ck string) []string {
	t.Helper()
	tasks := make([]NewTask, n)
	ids := make([]string, n)
	for i := range tasks {
		tasks[i] = b.task(t, queue, "")
		tasks[i].ConcurrencyKey = ck
		ids[i] = tasks[i].ID
	}
	b.ingest(t, queue, tasks...)
	return ids
}

func TestRateLimitSpacesStarts(t *testing.T) {
	t.Parallel()
	b := newTestRDB(t)
	require.NoError(t, b.r.EnsureGroups(b.ctx, "q"))
	b.ingestN(t, "q", 10, "")
	_, err := b.r.SetLimits(b.ctx, "q", &dtqtype.QueueLimits{Rate: &dtqtype.RateLimit{Limit: 2, Period: dtqtype.Duration(time.Second)}})
	require.NoError(t, err)
	now := b.now
	cr, err := b.r.Claim(b.ctx, "q", testSettings, 8, now, "")
	require.NoError(t, err)
	require.Len(t, cr.Tasks, 1, "burst 1: one start, then one every 500ms")
	cr, err = b.r.Claim(b.ctx, "q", testSettings, 8, now.Add(100*time.Millisecond), "")
	require.NoError(t, err)
	require.True(t, cr.Limited)
	require.Equal(t, "rate", cr.Reason)
	require.Equal(t, 400*time.Millisecond, cr.Wait)
	cr, err = b.r.Claim(b.ctx, "q", testSettings, 8, now.Add(500*time.Millisecond), "")
	require.NoError(t, err)
	require.Len(t, cr.Tasks, 1)
	// After 2 s idle, still one at a time: no window of 1 s holds more than 2.
	cr, err = b.r.Claim(b.ctx, "q", testSettings, 8, now.Add(3*time.Second), "")
	require.NoError(t, err)
	require.Len(t, cr.Tasks, 1)

	// A burst lets an idle queue start that many at once.
	_, err = b.r.SetLimits(b.ctx, "q", &dtqtype.QueueLimits{Rate: &dtqtype.RateLimit{Limit: 2, Period: dtqtype.Duration(time.Second), Burst: 3}})
	require.NoError(t, err)
	cr, err = b.r.Claim(b.ctx, "q", testSettings, 8, now.Add(10*time.Second), "")
	require.NoError(t, err)
	require.Len(t, cr.Tasks, 3)
}

func TestConcurrencyLimitCountsLeases(t *testing.T) {
	t.Parallel()
	b := newTestRDB(t)
	require.NoError(t, b.r.EnsureGroups(b.ctx, "q"))
	b.ingestN(t, "q", 5, "")
	_, err := b.r.SetLimits(b.ctx, "q", &dtqtype.QueueLimits{Concurrency: 2})
	require.NoError(t, err)
	cr, err := b.r.Claim(b.ctx, "q", testSettings, 8, b.now, "")
	require.NoError(t, err)
	require.Len(t, cr.Tasks, 2)
	cr2, err := b.r.Claim(b.ctx, "q", testSettings, 8, b.now, "")
	require.NoError(t, err)
	require.True(t, cr2.Limited)
	require.Equal(t, "concurrency", cr2.Reason)
	require.EqualValues(t, -1, cr2.Wait)
	// A finalize releases and wakes.
	errs, err := b.r.FinishSucceeded(b.ctx, "q", testSettings, b.now, []Success{{ID: cr.Tasks[0].ID, Attempt: 1}})
	require.NoError(t, err)
	require.NoError(t, errs[0])
	id, err := b.r.WaitWake(b.ctx, "q", "0-0", time.Millisecond)
	require.NoError(t, err)
	require.NotEqual(t, "0-0", id, "the release woke the limited claimers")
	cr, err = b.r.Claim(b.ctx, "q", testSettings, 8, b.now, "")
	require.NoError(t, err)
	require.Len(t, cr.Tasks, 1)
	// An expired lease still counts until it is reclaimed.
	later := b.now.Add(time.Hour)
	cr2, err = b.r.Claim(b.ctx, "q", testSettings, 8, later, "")
	require.NoError(t, err)
	require.True(t, cr2.Limited)
	other := *testSettings
	other.WorkerID = "w2"
	_, err = b.r.Reclaim(b.ctx, "q", &other, 0, later, "r", nil) // no room: requeued
	require.NoError(t, err)
	cr2, err = b.r.Claim(b.ctx, "q", testSettings, 8, later, "")
	require.NoError(t, err)
	require.Len(t, cr2.Tasks, 2, "the reclaimed leases gave their slots back")
}

func TestKeyConcurrencyHoldsAKeyAndLetsOthersPass(t *testing.T) {
	t.Parallel()
	b := newTestRDB(t)
	require.NoError(t, b.r.EnsureGroups(b.ctx, "q"))
	a := b.ingestN(t, "q", 3, "acct-a")
	bb := b.ingestN(t, "q", 2, "acct-b")
	_, err := b.r.SetLimits(b.ctx, "q", &dtqtype.QueueLimits{KeyConcurrency: 1})
	require.NoError(t, err)
	cr, err := b.r.Claim(b.ctx, "q", testSettings, 8, b.now, "")
	require.NoError(t, err)
	require.Equal(t, []string{a[0], bb[0]}, ids(cr.Tasks), "one per key; the key's others are held")
	require.Equal(t, 3, cr.Held)
	require.Equal(t, dtqtype.StatusQueued, b.get(t, a[1]).Status, "a held task is still queued")

	// Recount counts held tasks.
	old, now, err := b.r.Recount(b.ctx, "q")
	require.NoError(t, err)
	require.Equal(t, old, now)

	// Finishing a's task puts a's next one back, in order.
	require.NoError(t, b.r.FinishRetry(b.ctx, finishArgsOf(cr.Tasks[0], b.now), testSettings, time.Hour, "X", "y"))
	cr, err = b.r.Claim(b.ctx, "q", testSettings, 8, b.now, "")
	require.NoError(t, err)
	require.Equal(t, []string{a[1]}, ids(cr.Tasks))
	errs, err := b.r.FinishSucceeded(b.ctx, "q", testSettings, b.now, []Success{{ID: a[1], Attempt: 1}})
	require.NoError(t, err)
	require.NoError(t, errs[0])
	cr, err = b.r.Claim(b.ctx, "q", testSettings, 8, b.now, "")
	require.NoError(t, err)
	require.Equal(t, []string{a[2]}, ids(cr.Tasks))
}

func ids(ts []ClaimedTask) []string {
	out := make([]string, len(ts))
	for i, t := range ts {
		out[i] = t.ID
	}
	return out
}
