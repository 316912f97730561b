package rdb

import (
	"context"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"

	"github.com/dtq-io/dtq/internal/redistest"
)

// anyTime is a creation bound no test's task id reaches: a Tidy that looks
// at every id. (Task ids of one process never go back in time, so a test's
// ids may be ahead of its own clock.)
var anyTime = time.UnixMilli(1<<48 - 1)

// bigPayload is over Redis's default hash-max-listpack-value (64), so a
// queued task's hash is a hashtable.
var bigPayload = []byte(`{"data":"` + strings.Repeat("x", 120) + `"}`)

// succeedOne claims one task of q (changed by mod) and finalizes it as
// succeeded with result, returning the claimed task.
func (b *testRDB) succeedOne(t *testing.T, q string, s *WorkerSettings, mod func(*NewTask), result []byte) ClaimedTask {
	t.Helper()
	require.NoError(t, b.r.EnsureGroups(b.ctx, q))
	nt := b.task(t, q, "")
	if mod != nil {
		mod(&nt)
	}
	b.ingest(t, q, nt)
	cr, err := b.r.Claim(b.ctx, q, s, 1, b.now, "c-"+nt.ID)
	require.NoError(t, err)
	require.Len(t, cr.Tasks, 1)
	ct := cr.Tasks[0]
	errs, err := b.r.FinishSucceeded(b.ctx, q, s, b.now.Add(25*time.Millisecond), []Success{{ID: ct.ID, Attempt: ct.Attempt, Result: result}})
	require.NoError(t, err)
	require.NoError(t, errs[0])
	return ct
}

// TestSucceededRecordIsCompact: a succeeded task's hash keeps status, type
// and the packed done field (and optional fields), is a listpack again
// under Redis's default listpack limits, and reads back as the same task:
// attempt, times, worker and the attempt record folded into done.
func TestSucceededRecordIsCompact(t *testing.T) {
	t.Parallel()
	b := newTestRDB(t)
	// The shared server runs with Redis's default listpack limits.
	ct := b.succeedOne(t, "q", testSettings, func(nt *NewTask) {
		nt.Payload = bigPayload
		nt.Metadata = []byte(`{"trace":"abc"}`)
		nt.IdempotencyKey = "k1"
	}, []byte(`{"ok":true}`))

	h := b.c.HGetAll(b.ctx, b.keys.Task("q", ct.ID)).Val()
	require.ElementsMatch(t, []string{"status", "type", "done", "idem_key", "fingerprint", "has_result", "metadata"}, keysOf(h),
		"a keyed task keeps its fingerprint (a replay with other work is a mismatch), every task its metadata")
	for f, v := range h {
		require.LessOrEqual(t, len(v), 64, "field %s stays within Redis's default hash-max-listpack-value", f)
	}
	require.Equal(t, "listpack", b.c.ObjectEncoding(b.ctx, b.keys.Task("q", ct.ID)).Val())

	ti := b.get(t, ct.ID)
	require.Equal(t, "succeeded", string(ti.Status))
	require.Equal(t, 1, ti.Attempt)
	require.Equal(t, 5, ti.Priority)
	require.Equal(t, 5, ti.MaxAttempts)
	require.EqualValues(t, 30000, ti.TimeoutMS)
	require.Equal(t, b.now.UnixMilli(), ti.CreatedAt.UnixMilli())
	require.Equal(t, b.now.UnixMilli(), ti.Execution.StartedAt.UnixMilli())
	require.Equal(t, b.now.Add(25*time.Millisecond).UnixMilli(), ti.Execution.FinishedAt.UnixMilli())
	require.EqualValues(t, 25, *ti.Execution.DurationMS)
	require.Equal(t, "w1", ti.Execution.WorkerID)
	require.Equal(t, "k1", *ti.IdempotencyKey)
	require.JSONEq(t, `{"ok":true}`, string(ti.Result))
	require.True(t, ti.PayloadDropped)
	require.Nil(t, ti.Payload)
	require.JSONEq(t, `{"trace":"abc"}`, string(ti.Metadata), "metadata ties a task to its schedule, trace and tags")
	require.Len(t, ti.Attempts, 1)
	require.Equal(t, "succeeded", ti.Attempts[0].Outcome)
	require.Equal(t, "w1", ti.Attempts[0].WorkerID)
	require.EqualValues(t, 25, ti.Attempts[0].DurationMS)

	// keep_payload keeps the payload too.
	kept := b.succeedOne(t, "q", testSettings, func(nt *NewTask) {
		nt.Payload, nt.Metadata, nt.KeepPayload = bigPayload, []byte(`{"trace":"abc"}`), true
	}, nil)
	ti = b.get(t, kept.ID)
	require.False(t, ti.PayloadDropped)
	require.True(t, ti.KeepPayload)
	require.JSONEq(t, string(bigPayload), string(ti.Payload))
	require.JSONEq(t, `{"trace":"abc"}`, string(ti.Metadata))

	// A worker id too long for done gets its own field.
	long := *testSettings
	long.WorkerID = strings.Repeat("w", 50)
	lt := b.succeedOne(t, "q", &long, nil, nil)
	h = b.c.HGetAll(b.ctx, b.keys.Task("q", lt.ID)).Val()
	require.Equal(t, long.WorkerID, h["worker_id"])
	require.Equal(t, long.WorkerID, b.get(t, lt.ID).Execution.WorkerID)

	// Sent again after a lost reply: "already finalized", not lease lost.
	errs, err := b.r.FinishSucceeded(b.ctx, "q", &long, b.now.Add(time.Second), []Success{{ID: lt.ID, Attempt: 1}})
	require.NoError(t, err)
	require.NoError(t, errs[0])
	errs, err = b.r.FinishSucceeded(b.ctx, "q", testSettings, b.now.Add(time.Second), []Success{{ID: lt.ID, Attempt: 1}})
	require.NoError(t, err)
	require.ErrorIs(t, errs[0], ErrLeaseLost, "another worker's success is not this one's")
}

// TestEarlierAttemptsSurviveCompaction: a task that failed once and then
// succeeded keeps the failed attempt's record next to done.
func TestEarlierAttemptsSurviveCompaction(t *testing.T) {
	t.Parallel()
	b := newTestRDB(t)
	ct := b.claimOne(t, "q", nil)
	require.NoError(t, b.r.FinishRetry(b.ctx, finishArgsOf(ct, b.now), testSettings, 0, "Boom", "first try failed"))
	_, err := b.r.Promote(b.ctx, "q", testSettings, b.now.Add(time.Millisecond))
	require.NoError(t, err)
	cr, err := b.r.Claim(b.ctx, "q", testSettings, 1, b.now.Add(2*time.Millisecond), "c2")
	require.NoError(t, err)
	require.Len(t, cr.Tasks, 1)
	errs, err := b.r.FinishSucceeded(b.ctx, "q", testSettings, b.now.Add(3*time.Millisecond),
		[]Success{{ID: ct.ID, Attempt: 2}})
	require.NoError(t, err)
	require.NoError(t, errs[0])
	ti := b.get(t, ct.ID)
	require.Equal(t, 2, ti.Attempt)
	require.Len(t, ti.Attempts, 2)
	require.Equal(t, "retry", ti.Attempts[0].Outcome)
	require.Equal(t, "Boom", ti.Attempts[0].ErrorClass)
	require.Equal(t, "succeeded", ti.Attempts[1].Outcome)
	require.Empty(t, ti.Execution.ErrorClass, "a success clears the last error")
}

// TestRetentionByOutcome: retention starts at the end by outcome, a task's
// own retention wins, 0 deletes at once, and a task with an idempotency
// key is kept at least as long as its record.
func TestRetentionByOutcome(t *testing.T) {
	t.Parallel()
	s := *testSettings
	s.SucceededRetention, s.FailedRetention = time.Hour, 48*time.Hour
	tests := []struct {
		name string
		mod  func(*NewTask)
		fail bool
		want time.Duration // 0: deleted
	}{
		{"succeeded", nil, false, time.Hour},
		{"dead lettered out of the DLQ is failed retention", nil, true, 48 * time.Hour},
		{"own retention", func(nt *NewTask) { nt.Retention = 600 }, false, 10 * time.Minute},
		{"own retention on failure", func(nt *NewTask) { nt.Retention = 600 }, true, 10 * time.Minute},
		{"none", func(nt *NewTask) { nt.Retention = -1 }, false, 0},
		{"none on failure", func(nt *NewTask) { nt.Retention = -1 }, true, 0},
		{"idempotency record outlives retention", func(nt *NewTask) { nt.IdempotencyKey, nt.IdemTTL = "k", 7200 }, false, 2 * time.Hour},
		{"idempotency record keeps a task with none", func(nt *NewTask) {
			nt.IdempotencyKey, nt.IdemTTL, nt.Retention = "k", 7200, -1
		}, false, 2 * time.Hour},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			b := newTestRDB(t)
			require.NoError(t, b.r.EnsureGroups(b.ctx, "q"))
			nt := b.task(t, "q", "")
			if tt.mod != nil {
				tt.mod(&nt)
			}
			b.ingest(t, "q", nt)
			cr, err := b.r.Claim(b.ctx, "q", &s, 1, b.now, "c1")
			require.NoError(t, err)
			ct := cr.Tasks[0]
			if tt.fail {
				require.NoError(t, b.r.FinishDead(b.ctx, finishArgsOf(ct, b.now), &s, "Boom", "no", false))
				out, err := b.r.DLQDiscard(b.ctx, "q", ct.ID, &AdminSettings{FailedRetention: s.FailedRetention, EventsMaxLen: 100}, b.now)
				require.NoError(t, err)
				require.Equal(t, "discarded", out)
			} else {
				errs, err := b.r.FinishSucceeded(b.ctx, "q", &s, b.now, []Success{{ID: ct.ID, Attempt: 1}})
				require.NoError(t, err)
				require.NoError(t, errs[0])
			}
			ttl := b.c.PTTL(b.ctx, b.keys.Task("q", ct.ID)).Val()
			if tt.want == 0 {
				require.EqualValues(t, -2, ttl, "deleted at once")
				// Sent again after a lost reply: finalized, not lease lost.
				if tt.fail {
					require.NoError(t, b.r.FinishDead(b.ctx, finishArgsOf(ct, b.now), &s, "Boom", "no", false))
				} else {
					errs, err := b.r.FinishSucceeded(b.ctx, "q", &s, b.now, []Success{{ID: ct.ID, Attempt: 1}})
					require.NoError(t, err)
					require.NoError(t, errs[0])
				}
				return
			}
			require.InDelta(t, tt.want.Seconds(), ttl.Seconds(), 2)
		})
	}
}

// TestRetainedCountsAndTidy: finished tasks are counted by status until
// their retention ends; the tidy pass drops the recent-index ids of tasks
// gone and prunes ended buckets; DeleteTask takes a task out of the count.
func TestRetainedCountsAndTidy(t *testing.T) {
	t.Parallel()
	b := newTestRDB(t)
	s := *testSettings
	s.SucceededRetention = 2 * time.Second
	var ids []string
	for range 3 {
		ids = append(ids, b.succeedOne(t, "q", &s, nil, nil).ID)
	}
	failed := b.claimOne(t, "q", nil)
	require.NoError(t, b.r.FinishDead(b.ctx, finishArgsOf(failed, b.now), &s, "Boom", "no", false))
	out, err := b.r.DLQDiscard(b.ctx, "q", failed.ID, &AdminSettings{FailedRetention: time.Hour}, b.now)
	require.NoError(t, err)
	require.Equal(t, "discarded", out)

	st, err := b.r.QueueInfo(b.ctx, "q", b.now, 1)
	require.NoError(t, err)
	require.Equal(t, map[string]int64{"succeeded": 3, "dead_lettered": 1}, st.Retained)
	sizes, err := b.r.QueueSizes(b.ctx, []string{"q"}, b.now)
	require.NoError(t, err)
	require.EqualValues(t, 4, sizes[0].Retained)

	o, _, err := b.r.DeleteTask(b.ctx, "q", ids[0], b.now)
	require.NoError(t, err)
	require.Equal(t, "deleted", o)
	st, err = b.r.QueueInfo(b.ctx, "q", b.now, 1)
	require.NoError(t, err)
	require.Equal(t, map[string]int64{"succeeded": 2, "dead_lettered": 1}, st.Retained)

	// Once the succeeded tasks' hashes are gone (their 2 s retention, at
	// most a minute's bucket later), they are no longer counted, and tidy
	// drops them from the recent index and prunes their bucket.
	for _, id := range ids[1:] {
		require.NoError(t, b.c.Del(b.ctx, b.keys.Task("q", id)).Err()) // what the TTL does
	}
	later := b.now.Add(2 * time.Minute)
	st, err = b.r.QueueInfo(b.ctx, "q", later, 1)
	require.NoError(t, err)
	require.Equal(t, map[string]int64{"dead_lettered": 1}, st.Retained)
	res, err := b.r.Tidy(b.ctx, "q", later, anyTime)
	require.NoError(t, err)
	require.Equal(t, TidyResult{Examined: 3, Dropped: 2, Pruned: 1, Wrapped: true}, res) // ids[0] left at delete
	require.Equal(t, []string{recentMember(failed.ID)}, b.c.LRange(b.ctx, b.keys.Recent("q"), 0, -1).Val())
	require.Len(t, b.c.HKeys(b.ctx, b.keys.Retained("q")).Val(), 1)
}

// TestTidyWalksInSteps: a walk longer than one call resumes where the
// last call stopped and starts over at the end.
func TestTidyWalksInSteps(t *testing.T) {
	t.Parallel()
	b := newTestRDB(t)
	num, err := b.r.QueueNumber(b.ctx, "q")
	require.NoError(t, err)
	n := TidyBatch + 10
	members := make([]any, n)
	for i := range members {
		members[i] = recentMember(NewTaskID(num, b.now))
	}
	require.NoError(t, b.c.LPush(b.ctx, b.keys.Recent("q"), members...).Err())
	res, err := b.r.Tidy(b.ctx, "q", b.now.Add(time.Minute), anyTime)
	require.NoError(t, err)
	require.Equal(t, TidyResult{Examined: TidyBatch, Dropped: TidyBatch}, res)
	res, err = b.r.Tidy(b.ctx, "q", b.now.Add(time.Minute), anyTime)
	require.NoError(t, err)
	require.Equal(t, TidyResult{Examined: 10, Dropped: 10, Wrapped: true}, res)
	require.Zero(t, b.c.LLen(b.ctx, b.keys.Recent("q")).Val())
}

// TestTidyLooksOnlyAtOldEnoughIds: ids of tasks younger than the shortest
// retention cost no lookup; once old enough they are walked.
func TestTidyLooksOnlyAtOldEnoughIds(t *testing.T) {
	t.Parallel()
	b := newTestRDB(t)
	num, err := b.r.QueueNumber(b.ctx, "q")
	require.NoError(t, err)
	members := []any{recentMember(NewTaskID(num, b.now)), recentMember(NewTaskID(num, b.now))}
	require.NoError(t, b.c.LPush(b.ctx, b.keys.Recent("q"), members...).Err())
	created := TaskIDTime(members[0].(string) + "0000")
	res, err := b.r.Tidy(b.ctx, "q", b.now, created)
	require.NoError(t, err)
	require.Equal(t, TidyResult{Wrapped: true}, res, "created too recently to be looked at")
	res, err = b.r.Tidy(b.ctx, "q", b.now, created.Add(time.Second))
	require.NoError(t, err)
	require.Equal(t, TidyResult{Examined: 2, Dropped: 2, Wrapped: true}, res)
}

// privateRDB starts a server of the test's own with Redis's default
// configuration, for memory figures no other test disturbs. used reads its
// used_memory.
func privateRDB(t *testing.T) (r *RDB, c *redis.Client, used func() int64) {
	t.Helper()
	srv, err := redistest.Start()
	require.NoError(t, err)
	t.Cleanup(srv.Stop)
	c = srv.Client(t)
	r = New(c, "dtq")
	require.NoError(t, r.LoadScripts(context.Background()))
	return r, c, func() int64 {
		v, _ := strconv.ParseInt(infoField(c.Info(context.Background(), "memory").Val(), "used_memory"), 10, 64)
		return v
	}
}

// TestMemoryOfRetainedTasks measures, on a private server with Redis's
// default configuration, what a retained succeeded task costs and that
// memory returns to its baseline once retention passes and tidy ran.
func TestMemoryOfRetainedTasks(t *testing.T) {
	if testing.Short() {
		t.Skip("measures memory with 20,000 tasks")
	}
	t.Parallel()
	r, c, used := privateRDB(t)
	ctx := context.Background()
	require.NoError(t, r.EnsureGroups(ctx, "q"))
	num, err := r.QueueNumber(ctx, "q")
	require.NoError(t, err)
	s := &WorkerSettings{WorkerID: "host-1234-5678-abcdef-0123456789", Lease: time.Minute, EventsMaxLen: 10,
		SucceededRetention: 15 * time.Second, FailedRetention: time.Hour, ResultRetention: time.Hour, DLQEnabled: true, DLQMaxLen: 10}
	opt := IngestOptions{MaxDepth: 1 << 30, EventsMaxLen: 10, RecentCap: 1 << 30}
	const n, batch = 20000, 500
	now := time.Now()
	base := used()
	for done := 0; done < n; done += batch {
		tasks := make([]NewTask, batch)
		for i := range tasks {
			tasks[i] = testTask(num, now, "")
			tasks[i].Payload = bigPayload
		}
		_, err := r.Ingest(ctx, "q", now, opt, tasks)
		require.NoError(t, err)
		cr, err := r.Claim(ctx, "q", s, batch, now, "c"+strconv.Itoa(done))
		require.NoError(t, err)
		require.Len(t, cr.Tasks, batch)
		succ := make([]Success, batch)
		for i, ct := range cr.Tasks {
			succ[i] = Success{ID: ct.ID, Attempt: ct.Attempt}
		}
		_, err = r.FinishSucceeded(ctx, "q", s, now, succ)
		require.NoError(t, err)
	}
	require.Len(t, c.Keys(ctx, "dtq:task:*").Val(), n, "every task still retained (the run took over 15 s?)")
	full := used()
	t.Logf("after %d succeeded tasks: %+.1f MB (recent index %.1f MB, event stream %.1f MB); one hash: %d bytes", n,
		float64(full-base)/1e6, float64(c.MemoryUsage(ctx, r.Keys().Recent("q"), 0).Val())/1e6,
		float64(c.MemoryUsage(ctx, r.Keys().Events("q"), 0).Val())/1e6,
		c.MemoryUsage(ctx, c.Keys(ctx, "dtq:task:*").Val()[0], 0).Val())

	// Retention passes: the hashes expire; what that frees is what a
	// retained task costs (hash, key, expiry entry).
	require.Eventually(t, func() bool {
		return len(c.Keys(ctx, "dtq:task:*").Val()) == 0
	}, 60*time.Second, 100*time.Millisecond)
	perTask := float64(full-used()) / n
	t.Logf("a retained succeeded task frees %.0f bytes when its retention ends", perTask)
	require.Less(t, perTask, 300.0)
	for {
		res, err := r.Tidy(ctx, "q", time.Now().Add(time.Hour), anyTime)
		require.NoError(t, err)
		if res.Wrapped {
			break
		}
	}
	after := used() - base
	t.Logf("after retention and tidy: %+.1f MB of the baseline", float64(after)/1e6)
	require.Less(t, after, int64(5<<20))
	require.Zero(t, c.LLen(ctx, r.Keys().Recent("q")).Val())
}

func keysOf(m map[string]string) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	return out
}

// TestMemoryPerState measures what a task costs Redis in each state, on a
// private server with Redis's default configuration: 10,000 tasks with a
// 100-byte payload, everything counted (task hashes, band streams, indexes,
// idempotency records) but the capped event stream and recent index, which
// it measures apart. docs/operations.md ("Sizing Redis") quotes these
// figures:
//
//	go test -run TestMemoryPerState -v ./internal/rdb
func TestMemoryPerState(t *testing.T) {
	if testing.Short() {
		t.Skip("measures memory with 10,000 tasks per state")
	}
	t.Parallel()
	r, c, used := privateRDB(t)
	ctx := context.Background()
	s := &WorkerSettings{WorkerID: "host-1234-abcdef", Lease: time.Hour, EventsMaxLen: 100000,
		SucceededRetention: time.Hour, FailedRetention: 7 * 24 * time.Hour, ResultRetention: time.Hour, DLQEnabled: true, DLQMaxLen: 100000}
	opt := IngestOptions{MaxDepth: 1 << 30, EventsMaxLen: 100000, RecentCap: 100000}
	payload := []byte(`{"data":"` + strings.Repeat("x", 88) + `"}`) // 100 bytes
	const n, batch = 10000, 500
	now := time.Now()
	// run takes n fresh tasks of queue q (with an idempotency key when
	// keyed) through the steps and returns the bytes per task after each.
	run := func(q string, keyed bool, steps ...string) map[string]float64 {
		require.NoError(t, r.EnsureGroups(ctx, q))
		num, err := r.QueueNumber(ctx, q)
		require.NoError(t, err)
		base := used()
		out := map[string]float64{}
		var claimed []ClaimedTask
		for _, step := range steps {
			for done := 0; done < n; done += batch {
				switch step {
				case "queued":
					tasks := make([]NewTask, batch)
					for i := range tasks {
						key := ""
						if keyed {
							key = "order-" + strconv.Itoa(done+i)
						}
						tasks[i] = testTask(num, now, key)
						tasks[i].Payload = payload
						tasks[i].IdemTTL = 86400
						if keyed { // a SHA-256 in hex, as submissions have
							tasks[i].Fingerprint = strings.Repeat("0123456789abcdef", 4)
						}
					}
					_, err := r.Ingest(ctx, q, now, opt, tasks)
					require.NoError(t, err)
				case "running":
					cr, err := r.Claim(ctx, q, s, batch, now, "c"+strconv.Itoa(done))
					require.NoError(t, err)
					claimed = append(claimed, cr.Tasks...)
				case "succeeded":
					succ := make([]Success, batch)
					for i, ct := range claimed[done : done+batch] {
						succ[i] = Success{ID: ct.ID, Attempt: ct.Attempt}
					}
					_, err := r.FinishSucceeded(ctx, q, s, now, succ)
					require.NoError(t, err)
				case "dead_lettered":
					for _, ct := range claimed[done : done+batch] {
						require.NoError(t, r.FinishDead(ctx, finishArgsOf(ct, now), s, "ValueError", "the order has no lines", false))
					}
				}
			}
			// The event stream and the recent index are capped per queue
			// (DTQ_EVENTS_MAXLEN, 100,000 ids): sized apart.
			events := c.MemoryUsage(ctx, r.Keys().Events(q), 0).Val()
			recent := c.MemoryUsage(ctx, r.Keys().Recent(q), 0).Val()
			out[step] = float64(used()-base-events-recent) / n
			out["event"] = float64(events) / float64(c.XLen(ctx, r.Keys().Events(q)).Val())
			out["recent"] = float64(recent) / float64(c.LLen(ctx, r.Keys().Recent(q)).Val())
		}
		return out
	}
	plain := run("plain", false, "queued", "running", "succeeded")
	failed := run("failed", false, "queued", "running", "dead_lettered")
	keyed := run("keyed", true, "queued", "running", "succeeded")
	t.Logf("bytes per task (100-byte payload; the capped event stream and recent index apart):")
	t.Logf("  queued %.0f, running %.0f, retained succeeded %.0f, dead-lettered %.0f",
		plain["queued"], plain["running"], plain["succeeded"], failed["dead_lettered"])
	t.Logf("  with an idempotency key (record included): queued %.0f, retained succeeded %.0f", keyed["queued"], keyed["succeeded"])
	t.Logf("  event stream: %.0f bytes per event; recent index: %.0f bytes per id", plain["event"], plain["recent"])
	// Loose bounds: the figures are for the docs; these catch a regression
	// that doubles them.
	require.Less(t, plain["succeeded"], 400.0)
	require.Less(t, plain["queued"], 1200.0)
}
