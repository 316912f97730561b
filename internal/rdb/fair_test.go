package rdb

import (
	"fmt"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"

	"github.com/dtq-io/dtq/dtqtype"
)

var testAdmin = &AdminSettings{EventsMaxLen: 1000, FailedRetention: time.Hour, IdempotencyTTL: time.Hour, DLQEnabled: true}

// fairRDB is a test store whose queue "q" has limits l and room for big
// backlogs.
func fairRDB(t *testing.T, l *dtqtype.QueueLimits) *testRDB {
	t.Helper()
	b := newTestRDB(t)
	b.opt.MaxDepth = 1_000_000
	require.NoError(t, b.r.EnsureGroups(b.ctx, "q"))
	if l != nil {
		_, err := b.r.SetLimits(b.ctx, "q", l)
		require.NoError(t, err)
	}
	return b
}

// ingestKey ingests n queued tasks of key ck in batches, returning their ids
// in submission order.
func (b *testRDB) ingestKey(t *testing.T, n int, ck string, prio int) []string {
	t.Helper()
	var out []string
	for n > 0 {
		m := min(n, 500)
		tasks := make([]NewTask, m)
		for i := range tasks {
			tasks[i] = b.task(t, "q", "")
			tasks[i].ConcurrencyKey = ck
			tasks[i].Priority = prio
			out = append(out, tasks[i].ID)
		}
		b.ingest(t, "q", tasks...)
		n -= m
	}
	return out
}

// claimN claims up to n tasks in one call at now.
func (b *testRDB) claimN(t *testing.T, n int, now time.Time) *ClaimResult {
	t.Helper()
	cr, err := b.r.Claim(b.ctx, "q", testSettings, n, now, "")
	require.NoError(t, err)
	return cr
}

// keyOf maps task ids to their keys.
func keyOf(m map[string]string, tasks []ClaimedTask) []string {
	out := make([]string, len(tasks))
	for i, ct := range tasks {
		out[i] = m[ct.ID]
	}
	return out
}

func index(ids []string, key string) map[string]string {
	m := make(map[string]string, len(ids))
	for _, id := range ids {
		m[id] = key
	}
	return m
}

// TestFairLoneKeyStartsWithinKClaims is the reported case: one worker slot,
// a big backlog of one key, then a few tasks of another. Without fairness
// the small key's tasks start after the whole backlog; with it, each starts
// within K = 2 claims.
func TestFairLoneKeyStartsWithinKClaims(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name   string
		limits *dtqtype.QueueLimits
		big    int
		within int // claims until the third small task started
	}{
		{"no fairness: after the backlog", nil, 300, 303},
		{"fairness", &dtqtype.QueueLimits{Fairness: &dtqtype.Fairness{}}, 300, 6},
		{"fairness, a 20000 backlog", &dtqtype.QueueLimits{Fairness: &dtqtype.Fairness{}}, 20000, 6},
		{"key_order alone", &dtqtype.QueueLimits{KeyOrder: "fifo"}, 300, 6},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			b := fairRDB(t, tc.limits)
			b.ingestKey(t, tc.big, "big", 5)
			small := index(b.ingestKey(t, 3, "small", 5), "small")
			seen, claims := 0, 0
			for seen < 3 {
				cr := b.claimN(t, 1, b.now)
				require.Len(t, cr.Tasks, 1)
				claims++
				if small[cr.Tasks[0].ID] != "" {
					seen++
				}
			}
			require.Equal(t, tc.within, claims)
		})
	}
}

// TestFairWeightsShareStarts: weights 3:1 give 3:1 shares (±5 %) over
// 10,000 starts, keyless tasks form one key of their own, and a key with
// one task starts within K claims of arriving even so.
func TestFairWeightsShareStarts(t *testing.T) {
	t.Parallel()
	b := fairRDB(t, &dtqtype.QueueLimits{Fairness: &dtqtype.Fairness{Weights: map[string]int{"heavy": 3}}})
	key := index(b.ingestKey(t, 10000, "heavy", 5), "heavy")
	for id := range index(b.ingestKey(t, 10000, "light", 5), "light") {
		key[id] = "light"
	}
	count := map[string]int{}
	for range 100 {
		cr := b.claimN(t, 100, b.now)
		require.Len(t, cr.Tasks, 100)
		for _, k := range keyOf(key, cr.Tasks) {
			count[k]++
		}
	}
	t.Logf("shares over 10000 starts: heavy %d, light %d", count["heavy"], count["light"])
	require.InDelta(t, 7500, count["heavy"], 375)
	require.InDelta(t, 2500, count["light"], 125)

	// Keyless tasks and a new key join the rotation at once: with K = 4
	// keys ready, each of the two newcomers starts within 4 claims.
	lone := index(b.ingestKey(t, 1, "lone", 5), "lone")
	keyless := index(b.ingestKey(t, 2, "", 5), "none")
	var got []string
	for i := 0; i < 4; i++ {
		cr := b.claimN(t, 1, b.now)
		require.Len(t, cr.Tasks, 1)
		id := cr.Tasks[0].ID
		got = append(got, lone[id]+keyless[id])
	}
	require.Contains(t, got, "lone")
	require.Contains(t, got, "none")
}

// TestFairStrictPriorityAcrossBands: a higher band goes first whatever the
// keys' passes.
func TestFairStrictPriorityAcrossBands(t *testing.T) {
	t.Parallel()
	b := fairRDB(t, &dtqtype.QueueLimits{Fairness: &dtqtype.Fairness{}})
	low := b.ingestKey(t, 3, "a", 2)
	high := b.ingestKey(t, 2, "b", 8)
	cr := b.claimN(t, 5, b.now)
	require.Equal(t, append(append([]string{}, high...), low...), ids(cr.Tasks))
}

// TestFairFIFOAcrossHandBacksReclaimsAndRequeues: with key_order fifo and
// key_concurrency 1 a key's tasks run as a strict sequence, a handed-back
// or reclaimed task keeping its place, and other keys pass a busy key.
func TestFairFIFOAcrossHandBacksReclaimsAndRequeues(t *testing.T) {
	t.Parallel()
	b := fairRDB(t, &dtqtype.QueueLimits{KeyOrder: "fifo", KeyConcurrency: 1})
	seq := b.ingestKey(t, 4, "acct", 5)
	other := b.ingestKey(t, 1, "other", 5)

	cr := b.claimN(t, 8, b.now)
	require.ElementsMatch(t, []string{seq[0], other[0]}, ids(cr.Tasks), "one of acct (its first), the other key passes")
	require.Equal(t, 1, cr.Held, "acct was parked at its key_concurrency")
	first := cr.Tasks[0]
	if first.ID != seq[0] {
		first = cr.Tasks[1]
	}
	require.Equal(t, dtqtype.StatusQueued, b.get(t, seq[1]).Status, "a parked key's tasks stay queued")

	// A hand-back puts it back first in its key.
	require.NoError(t, b.r.HandBack(b.ctx, finishArgsOf(first, b.now), testSettings))
	cr = b.claimN(t, 8, b.now)
	require.Equal(t, []string{seq[0]}, ids(cr.Tasks))

	// The leases expire and another worker reclaims them with no room:
	// they are requeued, and acct's still comes first.
	later := b.now.Add(time.Hour)
	w2 := *testSettings
	w2.WorkerID = "w2"
	_, err := b.r.Reclaim(b.ctx, "q", &w2, 0, later, "r1", nil)
	require.NoError(t, err)
	cr = b.claimN(t, 8, later)
	require.ElementsMatch(t, []string{seq[0], other[0]}, ids(cr.Tasks))

	// It succeeds: the next one of the key starts, and so on in order.
	var order []string
	ct := cr.Tasks[0]
	if ct.ID != seq[0] {
		ct = cr.Tasks[1]
	}
	for {
		errs, err := b.r.FinishSucceeded(b.ctx, "q", testSettings, later, []Success{{ID: ct.ID, Attempt: ct.Attempt}})
		require.NoError(t, err)
		require.NoError(t, errs[0])
		order = append(order, ct.ID)
		cr = b.claimN(t, 8, later)
		if len(cr.Tasks) == 0 {
			break
		}
		require.Len(t, cr.Tasks, 1)
		ct = cr.Tasks[0]
	}
	require.Equal(t, seq, order)
	old, now, err := b.r.Recount(b.ctx, "q")
	require.NoError(t, err)
	require.Equal(t, old, now, "the depth counter agrees with the structures")
	require.EqualValues(t, 1, now, "the other key's task is still running")
}

// TestFairRetryDoesNotHoldItsTurn: a task in retry backoff lets the next of
// its key start; once due, it goes back ahead of the key's later tasks
// (key_order fifo). A DLQ requeue goes back to its first place too.
func TestFairRetryDoesNotHoldItsTurn(t *testing.T) {
	t.Parallel()
	b := fairRDB(t, &dtqtype.QueueLimits{KeyOrder: "fifo", KeyConcurrency: 1})
	seq := b.ingestKey(t, 4, "acct", 5)
	cr := b.claimN(t, 1, b.now)
	require.Equal(t, []string{seq[0]}, ids(cr.Tasks))
	require.NoError(t, b.r.FinishRetry(b.ctx, finishArgsOf(cr.Tasks[0], b.now), testSettings, time.Minute, "X", "try again"))
	cr = b.claimN(t, 1, b.now)
	require.Equal(t, []string{seq[1]}, ids(cr.Tasks), "the retrying task does not hold the key")
	errs, err := b.r.FinishSucceeded(b.ctx, "q", testSettings, b.now, []Success{{ID: seq[1], Attempt: 1}})
	require.NoError(t, err)
	require.NoError(t, errs[0])

	due := b.now.Add(2 * time.Minute)
	_, err = b.r.Promote(b.ctx, "q", testSettings, due)
	require.NoError(t, err)
	cr = b.claimN(t, 1, due)
	require.Equal(t, []string{seq[0]}, ids(cr.Tasks), "once due, the retry is first of its key again")
	require.Equal(t, 2, cr.Tasks[0].Attempt)

	// It dies; seq[2] runs; a DLQ requeue puts it back before seq[3].
	require.NoError(t, b.r.FinishDead(b.ctx, finishArgsOf(cr.Tasks[0], due), testSettings, "X", "dead", false))
	cr = b.claimN(t, 1, due)
	require.Equal(t, []string{seq[2]}, ids(cr.Tasks))
	st, err := b.r.DLQRequeue(b.ctx, "q", seq[0], testAdmin, due, time.Time{})
	require.NoError(t, err)
	require.Equal(t, "requeued", st)
	errs, err = b.r.FinishSucceeded(b.ctx, "q", testSettings, due, []Success{{ID: seq[2], Attempt: 1}})
	require.NoError(t, err)
	require.NoError(t, errs[0])
	cr = b.claimN(t, 1, due)
	require.Equal(t, []string{seq[0]}, ids(cr.Tasks), "the requeued task is ahead of the key's later task")
}

// TestFairKeyRateSpacesStartsPerKey: key_rate 2/s spaces each key's starts
// 500 ms apart on the injected clock, keys independent, and a claim that
// has nothing to start until a token says when.
func TestFairKeyRateSpacesStartsPerKey(t *testing.T) {
	t.Parallel()
	b := fairRDB(t, &dtqtype.QueueLimits{KeyRate: &dtqtype.RateLimit{Limit: 2, Period: dtqtype.Duration(time.Second)}})
	key := index(b.ingestKey(t, 3, "a", 5), "a")
	for id := range index(b.ingestKey(t, 3, "b", 5), "b") {
		key[id] = "b"
	}
	starts := map[string][]time.Duration{}
	now := b.now
	for step := 0; step < 8 && len(starts["a"])+len(starts["b"]) < 6; step++ {
		cr := b.claimN(t, 8, now)
		for _, ct := range cr.Tasks {
			starts[key[ct.ID]] = append(starts[key[ct.ID]], now.Sub(b.now))
			require.EqualValues(t, now.UnixMilli(), b.get(t, ct.ID).Execution.StartedAt.UnixMilli())
		}
		if len(starts["a"])+len(starts["b"]) == 6 {
			require.False(t, cr.Limited, "nothing left to wait for")
			break
		}
		require.True(t, cr.Limited, "both keys out of tokens")
		require.Equal(t, "key_rate", cr.Reason)
		require.Equal(t, 500*time.Millisecond, cr.Wait)
		now = now.Add(cr.Wait)
	}
	want := []time.Duration{0, 500 * time.Millisecond, time.Second}
	require.Equal(t, want, starts["a"])
	require.Equal(t, want, starts["b"])
}

// TestFairSwitchingKeepsEveryTask: fairness switched on over a backlog in
// the band streams, and off over a backlog in the key queues, loses and
// strands nothing, and the order of each key survives both.
func TestFairSwitchingKeepsEveryTask(t *testing.T) {
	t.Parallel()
	b := fairRDB(t, nil)
	a := b.ingestKey(t, 50, "a", 5)
	c := b.ingestKey(t, 50, "c", 3)
	_, err := b.r.SetLimits(b.ctx, "q", &dtqtype.QueueLimits{Fairness: &dtqtype.Fairness{}, KeyOrder: "fifo"})
	require.NoError(t, err)
	d := b.ingestKey(t, 20, "", 5) // into key queues at once
	qi, err := b.r.QueueInfo(b.ctx, "q", b.now, 1)
	require.NoError(t, err)
	require.EqualValues(t, 120, qi.ReadyTotal)
	got := b.claimN(t, 30, b.now).Tasks // sorts the backlog, then starts
	require.Len(t, got, 30)
	qi, err = b.r.QueueInfo(b.ctx, "q", b.now, 1)
	require.NoError(t, err)
	require.EqualValues(t, 90, qi.ReadyTotal)
	// Band 5 first: "a" (sorted in) and the keyless tasks alternate.
	require.Equal(t, []dtqtype.KeyBacklog{{Key: "c", Queued: 50}, {Key: "a", Queued: 35}, {Key: "", Queued: 5}}, qi.TopKeys)

	// Off: the key queues go back into the band streams, in order.
	_, err = b.r.SetLimits(b.ctx, "q", &dtqtype.QueueLimits{Concurrency: 1000})
	require.NoError(t, err)
	qi, err = b.r.QueueInfo(b.ctx, "q", b.now, 1)
	require.NoError(t, err)
	require.EqualValues(t, 90, qi.ReadyTotal)
	require.Empty(t, qi.TopKeys)
	for {
		cr := b.claimN(t, 7, b.now)
		got = append(got, cr.Tasks...)
		if len(cr.Tasks) == 0 {
			break
		}
	}
	require.Len(t, got, 120, "every task started once")
	per := map[string][]string{}
	key := index(a, "a")
	for id := range index(c, "c") {
		key[id] = "c"
	}
	for id := range index(d, "d") {
		key[id] = "d"
	}
	for _, ct := range got {
		per[key[ct.ID]] = append(per[key[ct.ID]], ct.ID)
	}
	require.Equal(t, a, per["a"])
	require.Equal(t, c, per["c"])
	require.Equal(t, d, per["d"])
}

// TestFairClaimSentAgainAnswersTheSame: a claim resent after its reply was
// lost answers the tasks its first run started and takes no more of a
// key's slots or turns.
func TestFairClaimSentAgainAnswersTheSame(t *testing.T) {
	t.Parallel()
	b := fairRDB(t, &dtqtype.QueueLimits{Fairness: &dtqtype.Fairness{}, KeyConcurrency: 2})
	b.ingestKey(t, 5, "a", 5)
	b.ingestKey(t, 5, "b", 5)
	first, err := b.r.Claim(b.ctx, "q", testSettings, 3, b.now, "n1")
	require.NoError(t, err)
	require.Len(t, first.Tasks, 3)
	before := b.snapshot(t)
	again, err := b.r.Claim(b.ctx, "q", testSettings, 3, b.now, "n1")
	require.NoError(t, err)
	require.ElementsMatch(t, ids(first.Tasks), ids(again.Tasks))
	require.Equal(t, before, b.snapshot(t), "the resend wrote nothing")
	run, err := b.c.HGetAll(b.ctx, b.keys.KeyRunning("q")).Result()
	require.NoError(t, err)
	total := 0
	for _, v := range run {
		var n int
		_, _ = fmt.Sscan(v, &n)
		total += n
	}
	require.Equal(t, 3, total, "one key slot per started task")
}

// TestFairComposesWithQueueLimitsAndPause: concurrency caps the starts,
// pause stops them, a cancelled or expired task in a key queue is dropped
// and never started.
func TestFairComposesWithQueueLimitsAndPause(t *testing.T) {
	t.Parallel()
	b := fairRDB(t, &dtqtype.QueueLimits{Fairness: &dtqtype.Fairness{}, Concurrency: 2})
	a := b.ingestKey(t, 3, "a", 5)
	nt := b.task(t, "q", "")
	nt.ConcurrencyKey = "b"
	nt.ExpiresAt = b.now.Add(time.Second).UnixMilli()
	b.ingest(t, "q", nt)
	st, _, err := b.r.CancelTask(b.ctx, "q", a[0], testAdmin, b.now, "")
	require.NoError(t, err)
	require.Equal(t, "cancelled", st)

	later := b.now.Add(2 * time.Second) // nt has expired
	cr := b.claimN(t, 8, later)
	require.Equal(t, []string{a[1], a[2]}, ids(cr.Tasks), "concurrency 2; the cancelled and expired are dropped")
	require.Equal(t, dtqtype.StatusExpired, b.get(t, nt.ID).Status)
	cr = b.claimN(t, 8, later)
	require.True(t, cr.Limited)
	require.Equal(t, "concurrency", cr.Reason)

	_, err = b.r.SetPaused(b.ctx, "q", true, testAdmin, later, "test")
	require.NoError(t, err)
	b.ingestKey(t, 1, "c", 5)
	_, err = b.r.SetLimits(b.ctx, "q", &dtqtype.QueueLimits{Fairness: &dtqtype.Fairness{}})
	require.NoError(t, err)
	cr = b.claimN(t, 8, later)
	require.True(t, cr.Paused)
	_, err = b.r.SetPaused(b.ctx, "q", false, testAdmin, later, "test")
	require.NoError(t, err)
	cr = b.claimN(t, 8, later)
	require.Len(t, cr.Tasks, 1)
	old, now, err := b.r.Recount(b.ctx, "q")
	require.NoError(t, err)
	require.Equal(t, old, now)
}

// TestFairDeleteQueueRemovesTheKeyQueues: an emptied queue (its tasks
// cancelled while in key queues) is deleted with its key queue structures.
func TestFairDeleteQueueRemovesTheKeyQueues(t *testing.T) {
	t.Parallel()
	b := fairRDB(t, &dtqtype.QueueLimits{Fairness: &dtqtype.Fairness{}})
	for _, id := range append(b.ingestKey(t, 2, "a", 5), b.ingestKey(t, 1, "", 3)...) {
		st, _, err := b.r.CancelTask(b.ctx, "q", id, testAdmin, b.now, "")
		require.NoError(t, err)
		require.Equal(t, "cancelled", st)
	}
	_, err := b.r.SetLimits(b.ctx, "q", nil)
	require.NoError(t, err)
	_, err = b.r.SetLimits(b.ctx, "q", &dtqtype.QueueLimits{Fairness: &dtqtype.Fairness{}})
	require.NoError(t, err)
	b.ingestKey(t, 1, "b", 5)
	cr := b.claimN(t, 1, b.now)
	errs, err := b.r.FinishSucceeded(b.ctx, "q", testSettings, b.now, []Success{{ID: cr.Tasks[0].ID, Attempt: 1}})
	require.NoError(t, err)
	require.NoError(t, errs[0])
	st, _, err := b.r.CancelTask(b.ctx, "q", b.ingestKey(t, 1, "c", 5)[0], testAdmin, b.now, "")
	require.NoError(t, err)
	require.Equal(t, "cancelled", st)

	res, err := b.r.DeleteQueue(b.ctx, "q")
	require.NoError(t, err)
	require.True(t, res.Deleted, "%+v", res)
	for _, pattern := range []string{b.keys.FairActivePrefix("q") + "*", b.keys.KeyQueuePrefix("q") + "*",
		b.keys.FairState("q"), b.keys.FairKeys("q")} {
		left, err := b.admin.Keys(b.ctx, pattern).Result()
		require.NoError(t, err)
		require.Empty(t, left, pattern)
	}
}

// TestFairWorkflowNodesEnterTheirKeys: workflow nodes released from
// waiting go through the band stream into their key's queue and take
// their turn there; a keyed backlog does not hold them up.
func TestFairWorkflowNodesEnterTheirKeys(t *testing.T) {
	t.Parallel()
	b := fairRDB(t, &dtqtype.QueueLimits{Fairness: &dtqtype.Fairness{}})
	b.ingestKey(t, 50, "big", 5)
	a, c := b.wfNode(t, "q", "a", false), b.wfNode(t, "q", "c", false, "a")
	a.Task.ConcurrencyKey, c.Task.ConcurrencyKey = "flow", "flow"
	id := NewWorkflowID(b.now, RandomWorkflowTag())
	st := b.submitWorkflow(t, &NewWorkflow{ID: id, Nodes: []WorkflowNode{a, c}})
	b.release(t, id, st.Releases)
	got := ids(b.claimN(t, 2, b.now).Tasks)
	require.Contains(t, got, a.Task.ID, "the released root starts within K = 2 claims")
	errs, err := b.r.FinishSucceeded(b.ctx, "q", testSettings, b.now, []Success{{ID: a.Task.ID, Attempt: 1}})
	require.NoError(t, err)
	require.NoError(t, errs[0])
	b.relay(t, "q")
	got = ids(b.claimN(t, 2, b.now).Tasks)
	require.Contains(t, got, c.Task.ID, "the node released from waiting starts within K = 2 claims")
	old, now, err := b.r.Recount(b.ctx, "q")
	require.NoError(t, err)
	require.Equal(t, old, now)
}

// TestFairPurgeCancelsTheKeyQueues: a queue purge cancels the tasks waiting
// in key queues, parked keys' too, and leaves running ones alone.
func TestFairPurgeCancelsTheKeyQueues(t *testing.T) {
	t.Parallel()
	b := fairRDB(t, &dtqtype.QueueLimits{Fairness: &dtqtype.Fairness{}, KeyConcurrency: 1})
	a := b.ingestKey(t, 700, "a", 5)
	c := b.ingestKey(t, 3, "", 2)
	cr := b.claimN(t, 2, b.now)
	require.Equal(t, []string{a[0], c[0]}, ids(cr.Tasks), "a is parked after its first")
	n, err := b.r.PurgeQueue(b.ctx, "q", testAdmin, b.now)
	require.NoError(t, err)
	require.EqualValues(t, 699+2, n, "all but the two running")
	require.Equal(t, dtqtype.StatusCancelled, b.get(t, a[699]).Status)
	qi, err := b.r.QueueInfo(b.ctx, "q", b.now, 1)
	require.NoError(t, err)
	require.Zero(t, qi.ReadyTotal)
	require.Empty(t, qi.TopKeys)
	require.EqualValues(t, 2, qi.Depth, "the two running tasks")
}

// TestFairWithAStaleFlagStillShares: a process that has not yet seen
// fairness switched on (its view of the flag is up to a second old) writes
// band stream entries; the claims sort them into the key queues, and the
// small key still starts within K claims.
func TestFairWithAStaleFlagStillShares(t *testing.T) {
	t.Parallel()
	b := fairRDB(t, nil)
	other := New(b.c, b.keys.Prefix())
	require.False(t, other.keyQueues(b.ctx, "q"))
	_, err := b.r.SetLimits(b.ctx, "q", &dtqtype.QueueLimits{Fairness: &dtqtype.Fairness{}})
	require.NoError(t, err)
	require.True(t, other.keyQueues(b.ctx, "q") == false, "still the view of a moment ago")
	b.r = other
	b.ingestKey(t, 300, "big", 5)
	small := index(b.ingestKey(t, 3, "small", 5), "small")
	n, err := b.c.XLen(b.ctx, b.keys.Stream("q", 5)).Result()
	require.NoError(t, err)
	require.EqualValues(t, 303, n, "into the band stream")
	var pos []int
	for i := 1; len(pos) < 3; i++ {
		cr := b.claimN(t, 1, b.now)
		require.Len(t, cr.Tasks, 1)
		if small[cr.Tasks[0].ID] != "" {
			pos = append(pos, i)
		}
	}
	require.Equal(t, []int{2, 4, 6}, pos)
}

// TestFairIngestSentAgainWritesNothing: an ingest into key queues sent
// again after its reply was lost answers what it answered and writes
// nothing: no second key queue entry, count or sequence number.
func TestFairIngestSentAgainWritesNothing(t *testing.T) {
	t.Parallel()
	b := fairRDB(t, &dtqtype.QueueLimits{KeyOrder: "fifo"})
	tasks := make([]NewTask, 3)
	for i := range tasks {
		tasks[i] = b.task(t, "q", "")
		tasks[i].ConcurrencyKey = "a"
	}
	tasks[2].IdempotencyKey, tasks[2].Fingerprint = "k-1", "fp"
	first := b.ingest(t, "q", tasks...)
	before := b.snapshot(t)
	again := b.ingest(t, "q", tasks...)
	require.Equal(t, first, again)
	require.Equal(t, before, b.snapshot(t))
	n, err := b.c.ZCard(b.ctx, b.keys.KeyQueue("q", 5, "a")).Result()
	require.NoError(t, err)
	require.EqualValues(t, 3, n)
}

// TestFairParkedKeyComesBackInEveryBand: a key at its key_concurrency is
// parked in each band it has tasks in; the release of its running task
// unparks all of them, the higher band first, and nothing is left behind.
func TestFairParkedKeyComesBackInEveryBand(t *testing.T) {
	t.Parallel()
	b := fairRDB(t, &dtqtype.QueueLimits{Fairness: &dtqtype.Fairness{}, KeyConcurrency: 1})
	high := b.ingestKey(t, 2, "a", 7)
	low := b.ingestKey(t, 2, "a", 2)
	var order []string
	for len(order) < 4 {
		cr := b.claimN(t, 8, b.now)
		require.Len(t, cr.Tasks, 1, "one at a time: the key is parked in the other band")
		ct := cr.Tasks[0]
		order = append(order, ct.ID)
		errs, err := b.r.FinishSucceeded(b.ctx, "q", testSettings, b.now, []Success{{ID: ct.ID, Attempt: ct.Attempt}})
		require.NoError(t, err)
		require.NoError(t, errs[0])
	}
	require.Equal(t, append(append([]string{}, high...), low...), order)
	cr := b.claimN(t, 8, b.now)
	require.Empty(t, cr.Tasks)
	left, err := b.c.LLen(b.ctx, b.keys.KeyWaitPrefix("q")+"a").Result()
	require.NoError(t, err)
	require.Zero(t, left, "no marker left")
	old, now, err := b.r.Recount(b.ctx, "q")
	require.NoError(t, err)
	require.Equal(t, old, now)
	require.Zero(t, now)
}

// TestFairSwitchingOnOverABigBacklogStartsAtOnce: switched on over more
// band stream entries than a claim sorts, every claim still starts tasks,
// and all of them start once.
func TestFairSwitchingOnOverABigBacklogStartsAtOnce(t *testing.T) {
	t.Parallel()
	b := fairRDB(t, nil)
	b.ingestKey(t, 2500, "a", 5)
	_, err := b.r.SetLimits(b.ctx, "q", &dtqtype.QueueLimits{Fairness: &dtqtype.Fairness{}})
	require.NoError(t, err)
	seen := map[string]bool{}
	for len(seen) < 2500 {
		cr := b.claimN(t, 10, b.now)
		require.NotEmpty(t, cr.Tasks, "a claim that sorts also starts")
		for _, ct := range cr.Tasks {
			require.False(t, seen[ct.ID])
			seen[ct.ID] = true
		}
	}
	old, now, err := b.r.Recount(b.ctx, "q")
	require.NoError(t, err)
	require.Equal(t, old, now)
}

// TestFairIdleClaimWaitsOnTheWakeStream: a claim of a queue with key queues
// that finds nothing answers the bands' ids and the wake stream's, and a
// submission into a key queue adds a wake entry newer than it, so a
// worker blocked on them wakes (WaitReady reads all eleven).
func TestFairIdleClaimWaitsOnTheWakeStream(t *testing.T) {
	t.Parallel()
	b := fairRDB(t, &dtqtype.QueueLimits{Fairness: &dtqtype.Fairness{}})
	cr := b.claimN(t, 4, b.now)
	require.Empty(t, cr.Tasks)
	require.Len(t, cr.LastIDs, NumBands+1)
	require.Equal(t, "0-0", cr.LastIDs[NumBands], "no wake entry yet")
	b.ingestKey(t, 1, "a", 5)
	res, err := b.c.XRead(b.ctx, &redis.XReadArgs{Streams: []string{b.keys.Wake("q"), cr.LastIDs[NumBands]}, Count: 1, Block: -1}).Result()
	require.NoError(t, err)
	require.Len(t, res[0].Messages, 1, "the submission wrote a wake entry after the claim's")
	require.NoError(t, b.r.WaitReady(b.ctx, "q", cr.LastIDs, time.Millisecond))
	cr = b.claimN(t, 4, b.now)
	require.Len(t, cr.Tasks, 1)
}
