package rdb

import (
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"

	"github.com/dtq-io/dtq/dtqtype"
)

var testSettings = &WorkerSettings{WorkerID: "w1", Lease: 30 * time.Second, EventsMaxLen: 1000,
	SucceededRetention: time.Hour, FailedRetention: time.Hour, ResultRetention: time.Hour, DLQEnabled: true, DLQMaxLen: 100}

// claimOne ingests a task of queue q (changed by mod) and claims it as w1.
func (b *testRDB) claimOne(t *testing.T, q string, mod func(*NewTask)) ClaimedTask {
	t.Helper()
	require.NoError(t, b.r.EnsureGroups(b.ctx, q))
	nt := b.task(t, q, "")
	if mod != nil {
		mod(&nt)
	}
	b.ingest(t, q, nt)
	cr, err := b.r.Claim(b.ctx, q, testSettings, 1, b.now, "c1")
	require.NoError(t, err)
	require.Len(t, cr.Tasks, 1)
	return cr.Tasks[0]
}

func (b *testRDB) get(t *testing.T, id string) *dtqtype.TaskInfo {
	t.Helper()
	ti, err := b.r.GetTask(b.ctx, id)
	require.NoError(t, err)
	return ti
}

// terminalEvents counts the lifecycle events of id that end a task.
func (b *testRDB) eventTypes(t *testing.T, q, id string) []string {
	t.Helper()
	msgs, err := b.c.XRange(b.ctx, b.keys.Events(q), "-", "+").Result()
	require.NoError(t, err)
	var out []string
	for _, m := range msgs {
		if m.Values["task_id"] == id {
			out = append(out, m.Values["type"].(string))
		}
	}
	return out
}

func finishArgsOf(ct ClaimedTask, now time.Time) *FinishArgs {
	return &FinishArgs{Queue: ct.Queue, ID: ct.ID, Attempt: ct.Attempt, Priority: ct.Priority, Now: now}
}

// TestFinalizeSentAgainAnswersAsTheFirstTime: a finalize whose reply was
// lost is sent again with the same arguments; it answers what its first
// run did, writes nothing more, and never says lease_lost.
func TestFinalizeSentAgainAnswersAsTheFirstTime(t *testing.T) {
	t.Parallel()
	b := newTestRDB(t)
	ctx, r := b.ctx, b.r

	ct := b.claimOne(t, "succ", nil)
	for range 2 {
		errs, err := r.FinishSucceeded(ctx, "succ", testSettings, b.now, []Success{{ID: ct.ID, Attempt: ct.Attempt}})
		require.NoError(t, err)
		require.NoError(t, errs[0])
	}
	require.Equal(t, dtqtype.StatusSucceeded, b.get(t, ct.ID).Status)
	require.Equal(t, []string{"TASK_QUEUED", "TASK_STARTED", "TASK_SUCCEEDED"}, b.eventTypes(t, "succ", ct.ID))
	// Another worker's success of that attempt is still refused.
	other := *testSettings
	other.WorkerID = "w2"
	errs, err := r.FinishSucceeded(ctx, "succ", &other, b.now, []Success{{ID: ct.ID, Attempt: ct.Attempt}})
	require.NoError(t, err)
	require.ErrorIs(t, errs[0], ErrLeaseLost)

	ct = b.claimOne(t, "retry", nil)
	for range 2 {
		require.NoError(t, r.FinishRetry(ctx, finishArgsOf(ct, b.now), testSettings, time.Minute, "Boom", "again"))
	}
	require.Equal(t, dtqtype.StatusRetrying, b.get(t, ct.ID).Status)
	require.EqualValues(t, 1, b.c.ZCard(ctx, b.keys.Schedule("retry")).Val())

	ct = b.claimOne(t, "dead", nil)
	for range 2 {
		require.NoError(t, r.FinishDead(ctx, finishArgsOf(ct, b.now), testSettings, "Permanent", "no", false))
	}
	require.Equal(t, dtqtype.StatusDeadLettered, b.get(t, ct.ID).Status)
	require.Equal(t, "0", b.c.Get(ctx, b.keys.Depth("dead")).Val(), "depth decremented once")

	ct = b.claimOne(t, "handback", nil)
	a := finishArgsOf(ct, b.now)
	for range 2 {
		require.NoError(t, r.HandBack(ctx, a, testSettings))
	}
	require.Equal(t, dtqtype.StatusQueued, b.get(t, ct.ID).Status)
	require.EqualValues(t, 1, b.c.XLen(ctx, b.keys.Stream("handback", ct.Priority)).Val(), "one new entry")
}

// TestSucceededRecordKeepsWhatItShould: the compact record is status, type
// and done, plus every field of the running hash but those done replaces
// and those a success drops (fields no script writes today included), with
// the payload only under keep. A task named twice in one call is finalized
// once: its second entry answers "already finalized".
func TestSucceededRecordKeepsWhatItShould(t *testing.T) {
	t.Parallel()
	b := newTestRDB(t)
	ctx := b.ctx
	ct := b.claimOne(t, "q", func(nt *NewTask) {
		nt.Payload, nt.Metadata, nt.KeepPayload, nt.Retention = bigPayload, []byte(`{"trace":"abc"}`), true, 7200
	})
	key := b.keys.Task("q", ct.ID)
	require.NoError(t, b.c.HSet(ctx, key, "h:0:1:123", `{"attempt":1}`, "progress", "40", "progress_at", "1",
		"cancel_requested", "1", "previous_attempts", "0", "x_later", "kept too",
		"finished_at", "1", "error_class", "Boom", "error_message", "m", "retryable", "1", "retry_delay_ms", "5",
		"held", "1", "deps", "[]", "pq", "c:1:1:0").Err())
	running := b.c.HGetAll(ctx, key).Val()

	b.ingest(t, "q", b.task(t, "q", ""))
	cr, err := b.r.Claim(ctx, "q", testSettings, 1, b.now, "c2")
	require.NoError(t, err)
	require.Len(t, cr.Tasks, 1)
	plain := cr.Tasks[0]
	end := b.now.Add(25 * time.Millisecond)
	errs, err := b.r.FinishSucceeded(ctx, "q", testSettings, end, []Success{
		{ID: ct.ID, Attempt: 1, Result: []byte(`{"ok":true}`)}, {ID: plain.ID, Attempt: 1}, {ID: ct.ID, Attempt: 1}})
	require.NoError(t, err)
	require.Equal(t, []error{nil, nil, nil}, errs)

	// done counts created from the time in the id, which may run ahead of
	// the test's clock (ids of one process never go back).
	doneOf := func(id string) string {
		return "1,5,5,30000," + strconv.FormatInt(b.now.UnixMilli()-TaskIDTime(id).UnixMilli(), 10) + ",0,25,w1"
	}
	dropped := []string{"status", "type", "attempt", "priority", "max_attempts", "timeout_ms", "created_at",
		"started_at", "worker_id", "stream_id", "claim", "finished_at", "error_class", "error_message",
		"retryable", "retry_delay_ms", "held", "deps", "pq"}
	want := map[string]string{"status": "succeeded", "type": running["type"], "done": doneOf(ct.ID),
		"has_result": "1"}
	for f, v := range running {
		if !slices.Contains(dropped, f) {
			want[f] = v
		}
	}
	require.Equal(t, string(bigPayload), want["payload"], "kept with keep_payload")
	require.Equal(t, want, b.c.HGetAll(ctx, key).Val())
	require.InDelta(t, 7200, b.c.TTL(ctx, key).Val().Seconds(), 5, "the task's own retention")

	require.Equal(t, map[string]string{"status": "succeeded", "type": "echo", "done": doneOf(plain.ID)},
		b.c.HGetAll(ctx, b.keys.Task("q", plain.ID)).Val())
	require.Equal(t, "0", b.c.Get(ctx, b.keys.Depth("q")).Val(), "each task counted once")
	msgs, err := b.c.XRange(ctx, b.keys.Events("q"), "-", "+").Result()
	require.NoError(t, err)
	var ends []map[string]any
	for _, m := range msgs {
		if m.Values["type"] == "TASK_SUCCEEDED" {
			ends = append(ends, m.Values)
		}
	}
	require.Len(t, ends, 2)
	require.Equal(t, map[string]any{"type": "TASK_SUCCEEDED", "task_id": ct.ID, "task_type": "echo", "attempt": "1",
		"ts": strconv.FormatInt(end.UnixMilli()-TaskIDTime(ct.ID).UnixMilli(), 10), "worker_id": "w1", "meta": `{"duration_ms":25,"cancel_requested":true}`}, ends[0])
	require.Equal(t, `{"duration_ms":25}`, ends[1]["meta"])
}

// TestCancelWinsOverRetryAndDeadLetter: an error after a cancel request
// ends the task cancelled in the retry and dead scripts themselves.
func TestCancelWinsOverRetryAndDeadLetter(t *testing.T) {
	t.Parallel()
	b := newTestRDB(t)
	as := &AdminSettings{EventsMaxLen: 1000, FailedRetention: time.Hour, IdempotencyTTL: time.Hour, DLQEnabled: true}
	for _, q := range []string{"retry", "dead"} {
		ct := b.claimOne(t, q, nil)
		out, _, err := b.r.CancelTask(b.ctx, q, ct.ID, as, b.now, "test")
		require.NoError(t, err)
		require.Equal(t, "requested", out)
		a := finishArgsOf(ct, b.now)
		for range 2 { // sent again: the same answer
			if q == "retry" {
				err = b.r.FinishRetry(b.ctx, a, testSettings, time.Second, "Boom", "stopped")
			} else {
				err = b.r.FinishDead(b.ctx, a, testSettings, "Boom", "stopped", true)
			}
			require.ErrorIs(t, err, ErrCancelWon)
		}
		ti := b.get(t, ct.ID)
		require.Equal(t, dtqtype.StatusCancelled, ti.Status)
		require.Equal(t, "Cancelled", ti.Execution.ErrorClass)
		require.Zero(t, b.c.ZCard(b.ctx, b.keys.Schedule(q)).Val(), "not scheduled again")
		require.Zero(t, b.c.ZCard(b.ctx, b.keys.DLQ(q)).Val(), "not dead-lettered")
		require.Equal(t, "0", b.c.Get(b.ctx, b.keys.Depth(q)).Val())
	}
}

// TestReclaimRenewsLeasesItsProcessRuns: an expired lease whose attempt the
// reclaiming process still runs is renewed, not taken over (and, on the last
// attempt, not dead-lettered); the same worker id without that attempt in
// flight (a restarted process) takes it over.
func TestReclaimRenewsLeasesItsProcessRuns(t *testing.T) {
	t.Parallel()
	b := newTestRDB(t)
	ct := b.claimOne(t, "q", func(nt *NewTask) { nt.MaxAttempts = 1 })
	later := b.now.Add(time.Minute) // the lease has expired
	mine := []LeaseRef{{ct.ID, ct.Attempt}}
	got, err := b.r.Reclaim(b.ctx, "q", testSettings, 10, later, "r1", mine)
	require.NoError(t, err)
	require.Empty(t, got)
	ti := b.get(t, ct.ID)
	require.Equal(t, dtqtype.StatusRunning, ti.Status)
	require.Empty(t, ti.Execution.ErrorClass)
	score := b.c.ZScore(b.ctx, b.keys.Lease("q"), ct.ID).Val()
	require.EqualValues(t, later.Add(testSettings.Lease).UnixMilli(), score, "renewed")
	errs, err := b.r.FinishSucceeded(b.ctx, "q", testSettings, later, []Success{{ID: ct.ID, Attempt: ct.Attempt}})
	require.NoError(t, err)
	require.NoError(t, errs[0])
	require.Equal(t, dtqtype.StatusSucceeded, b.get(t, ct.ID).Status)

	ct = b.claimOne(t, "q2", nil)
	got, err = b.r.Reclaim(b.ctx, "q2", testSettings, 10, later, "r2", nil)
	require.NoError(t, err)
	require.Len(t, got, 1)
	require.Equal(t, 2, got[0].Attempt)
}

// TestReclaimedRunThatSucceedsShowsNoError: the lease-lost attempt is in the
// history; the execution block of the run that succeeded has no error.
func TestReclaimedRunThatSucceedsShowsNoError(t *testing.T) {
	t.Parallel()
	b := newTestRDB(t)
	ct := b.claimOne(t, "q", nil)
	later := b.now.Add(time.Minute)
	other := *testSettings
	other.WorkerID = "w2"
	got, err := b.r.Reclaim(b.ctx, "q", &other, 10, later, "r1", nil)
	require.NoError(t, err)
	require.Len(t, got, 1)
	require.Empty(t, b.get(t, ct.ID).Execution.ErrorClass, "a running attempt has no error yet")
	errs, err := b.r.FinishSucceeded(b.ctx, "q", &other, later, []Success{{ID: ct.ID, Attempt: got[0].Attempt}})
	require.NoError(t, err)
	require.NoError(t, errs[0])
	ti := b.get(t, ct.ID)
	require.Equal(t, dtqtype.StatusSucceeded, ti.Status)
	require.Empty(t, ti.Execution.ErrorClass)
	require.Empty(t, ti.Execution.ErrorMessage)
	require.Len(t, ti.Attempts, 2)
	require.Equal(t, "lease_lost", ti.Attempts[0].Outcome)
	require.Equal(t, "WorkerLost", ti.Attempts[0].ErrorClass)
	require.Equal(t, "succeeded", ti.Attempts[1].Outcome)
}

// TestClaimSentAgainAnswersItsTasks: a claim whose reply was lost, sent
// again with the same time and nonce, answers the tasks it started instead
// of leaving them running with no handler; a new call claims new tasks.
func TestClaimSentAgainAnswersItsTasks(t *testing.T) {
	t.Parallel()
	b := newTestRDB(t)
	ctx, r := b.ctx, b.r
	require.NoError(t, r.EnsureGroups(ctx, "q"))
	tasks := make([]NewTask, 5)
	for i := range tasks {
		tasks[i] = b.task(t, "q", "")
	}
	b.ingest(t, "q", tasks...)
	first, err := r.Claim(ctx, "q", testSettings, 2, b.now, "n1")
	require.NoError(t, err)
	require.Len(t, first.Tasks, 2)
	again, err := r.Claim(ctx, "q", testSettings, 2, b.now, "n1")
	require.NoError(t, err)
	require.Equal(t, first.Tasks, again.Tasks)
	fresh, err := r.Claim(ctx, "q", testSettings, 2, b.now, "n2")
	require.NoError(t, err)
	require.Len(t, fresh.Tasks, 2)
	require.NotEqual(t, first.Tasks[0].ID, fresh.Tasks[0].ID)
	require.NotEqual(t, first.Tasks[1].ID, fresh.Tasks[1].ID)
}

// TestHandBackKeepsItsRecord: a hand-back and the same attempt's end are two
// history records, in order.
func TestHandBackKeepsItsRecord(t *testing.T) {
	t.Parallel()
	b := newTestRDB(t)
	ct := b.claimOne(t, "q", nil)
	require.NoError(t, b.r.HandBack(b.ctx, finishArgsOf(ct, b.now), testSettings))
	cr, err := b.r.Claim(b.ctx, "q", testSettings, 1, b.now.Add(time.Second), "c2")
	require.NoError(t, err)
	require.Len(t, cr.Tasks, 1)
	require.Equal(t, ct.Attempt, cr.Tasks[0].Attempt, "same attempt")
	errs, err := b.r.FinishSucceeded(b.ctx, "q", testSettings, b.now.Add(2*time.Second), []Success{{ID: ct.ID, Attempt: ct.Attempt}})
	require.NoError(t, err)
	require.NoError(t, errs[0])
	ti := b.get(t, ct.ID)
	require.Len(t, ti.Attempts, 2)
	require.Equal(t, "handback", ti.Attempts[0].Outcome)
	require.Equal(t, "succeeded", ti.Attempts[1].Outcome)
}

// TestDLQRequeueIsAFreshStart: a dead letter whose deadline has passed runs
// again after a requeue (the deadline is cleared, or replaced when given);
// only entries of the DLQ index can be requeued; the history stays within
// the cap however often a task is requeued.
func TestDLQRequeueIsAFreshStart(t *testing.T) {
	t.Parallel()
	b := newTestRDB(t)
	ctx, r := b.ctx, b.r
	as := &AdminSettings{EventsMaxLen: 1000, FailedRetention: time.Hour, IdempotencyTTL: time.Hour, DLQEnabled: true}
	ct := b.claimOne(t, "q", func(nt *NewTask) {
		nt.MaxAttempts = 3
		nt.ExpiresAt = b.now.Add(2 * time.Second).UnixMilli()
	})
	now := b.now
	for round := range AttemptsCap + 5 {
		a := finishArgsOf(ct, now)
		require.NoError(t, r.FinishDead(ctx, a, testSettings, "Permanent", "no", false))
		now = now.Add(3 * time.Second) // past the original deadline
		var deadline time.Time
		if round == 0 {
			deadline = now.Add(time.Hour)
		}
		out, err := r.DLQRequeue(ctx, "q", ct.ID, as, now, deadline)
		require.NoError(t, err)
		require.Equal(t, "requeued", out)
		ti := b.get(t, ct.ID)
		require.Equal(t, dtqtype.StatusQueued, ti.Status)
		require.Empty(t, ti.Execution.ErrorClass)
		if round == 0 {
			require.Equal(t, deadline.UnixMilli(), ti.ExpiresAt.UnixMilli())
		}
		if round == 1 {
			require.True(t, ti.ExpiresAt.IsZero(), "the deadline is cleared")
			require.ErrorIs(t, b.c.ZScore(ctx, b.keys.Expiry("q"), ct.ID).Err(), redis.Nil, "nor indexed")
		}
		cr, err := r.Claim(ctx, "q", testSettings, 1, now, "")
		require.NoError(t, err)
		require.Len(t, cr.Tasks, 1, "round %d: runs again instead of expiring", round)
		ct = cr.Tasks[0]
		require.LessOrEqual(t, len(b.get(t, ct.ID).Attempts), AttemptsCap)
	}
	h, err := b.c.HKeys(ctx, b.keys.Task("q", ct.ID)).Result()
	require.NoError(t, err)
	records := 0
	for _, f := range h {
		if len(f) > 2 && f[:2] == "h:" {
			records++
		}
	}
	require.LessOrEqual(t, records, AttemptsCap, "history capped across requeues")

	// Discarded: no longer in the index, so no longer requeueable.
	require.NoError(t, r.FinishDead(ctx, finishArgsOf(ct, now), testSettings, "Permanent", "no", false))
	out, err := r.DLQDiscard(ctx, "q", ct.ID, as, now)
	require.NoError(t, err)
	require.Equal(t, "discarded", out)
	out, err = r.DLQRequeue(ctx, "q", ct.ID, as, now, time.Time{})
	require.NoError(t, err)
	require.Equal(t, "not_found", out)
}

func TestVersionAtLeast(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		v    string
		want bool
	}{
		{"7.0.15", true}, {"7.2.4", true}, {"8.0.0", true}, {"6.2.14", false}, {"6", false},
		{"7", true}, {"5.0.7", false}, {"x.y", true},
	} {
		require.Equal(t, c.want, versionAtLeast(c.v, 7, 0), c.v)
	}
}

func TestCheckVersionOnThisServer(t *testing.T) {
	t.Parallel()
	b := newTestRDB(t)
	v, err := b.r.CheckVersion(b.ctx)
	require.NoError(t, err)
	require.NotEmpty(t, v)
}
