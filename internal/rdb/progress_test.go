package rdb

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/dtq-io/dtq/dtqtype"
)

func (b *testRDB) progress(t *testing.T, s *WorkerSettings, ct ClaimedTask, seq int64, p string, lines ...string) ProgressResult {
	t.Helper()
	w := &ProgressWrite{Queue: ct.Queue, ID: ct.ID, Attempt: ct.Attempt, Seq: seq}
	if p != "" {
		w.Progress = []byte(p)
	}
	for _, l := range lines {
		w.Lines = append(w.Lines, LogEntry{TS: b.now, Line: l})
	}
	res, err := b.r.WriteProgress(b.ctx, s, b.now, w, DefaultLogCaps)
	require.NoError(t, err)
	return res
}

func (b *testRDB) logLines(t *testing.T, id string, attempt int) []string {
	t.Helper()
	page, err := b.r.TaskLogs(b.ctx, id, attempt, "", MaxLogPage)
	require.NoError(t, err)
	var out []string
	for _, it := range page.Items {
		out = append(out, fmt.Sprintf("%d %s", it.Attempt, it.Line))
	}
	return out
}

// TestProgressIsFencedByTheLease: another worker, another attempt, or an
// attempt that ended writes nothing.
func TestProgressIsFencedByTheLease(t *testing.T) {
	t.Parallel()
	b := newTestRDB(t)
	ct := b.claimOne(t, "pf", nil)
	require.Equal(t, ProgressWritten, b.progress(t, testSettings, ct, 1, "10", "one").Status)

	other := *testSettings
	other.WorkerID = "w2"
	require.Equal(t, ProgressLeaseLost, b.progress(t, &other, ct, 2, "90", "stale").Status)
	wrong := ct
	wrong.Attempt = 2
	require.Equal(t, ProgressLeaseLost, b.progress(t, testSettings, wrong, 2, "90", "stale").Status)
	claimed := *testSettings
	claimed.Claim = "not-the-claim"
	require.Equal(t, ProgressLeaseLost, b.progress(t, &claimed, ct, 2, "90", "stale").Status)

	errs, err := b.r.FinishSucceeded(b.ctx, "pf", testSettings, b.now, []Success{{ID: ct.ID, Attempt: ct.Attempt}})
	require.NoError(t, err)
	require.NoError(t, errs[0])
	require.Equal(t, ProgressLeaseLost, b.progress(t, testSettings, ct, 3, "100", "late").Status)

	ti := b.get(t, ct.ID)
	require.JSONEq(t, "10", string(ti.Progress))
	require.NotNil(t, ti.ProgressAt)
	require.Equal(t, b.now.UnixMilli(), ti.ProgressAt.UnixMilli())
	require.Equal(t, 1, ti.LogAttempts)
	require.Equal(t, []string{"1 one"}, b.logLines(t, ct.ID, 0))
	require.Contains(t, b.eventTypes(t, "pf", ct.ID), "TASK_PROGRESS")
}

// TestProgressSentAgainWritesNothing: a write sent again (its reply lost)
// answers what it answered the first time and changes nothing, so no line
// lands twice; an older number writes nothing either; the next one lands.
func TestProgressSentAgainWritesNothing(t *testing.T) {
	t.Parallel()
	b := newTestRDB(t)
	ct := b.claimOne(t, "pr", nil)
	caps := LogCaps{Lines: 2, Bytes: 1 << 20}
	write := func(seq int64, p string, lines ...string) func() (ProgressResult, error) {
		return func() (ProgressResult, error) {
			w := &ProgressWrite{Queue: "pr", ID: ct.ID, Attempt: ct.Attempt, Seq: seq, Progress: []byte(p)}
			for _, l := range lines {
				w.Lines = append(w.Lines, LogEntry{TS: b.now, Line: l})
			}
			return b.r.WriteProgress(b.ctx, testSettings, b.now, w, caps)
		}
	}
	res := twice(t, b, "progress", write(1, "10", "a", "b", "c"))
	require.Equal(t, ProgressResult{Status: ProgressWritten, Dropped: 1}, res)
	before := b.snapshot(t)
	_, err := write(1, "99", "late resend")()
	require.NoError(t, err)
	require.Equal(t, before, b.snapshot(t), "a write numbered as an applied one must change nothing")
	res = twice(t, b, "progress", write(2, "20", "d"))
	require.Equal(t, ProgressResult{Status: ProgressWritten, Dropped: 1}, res)
	require.Equal(t, []string{"1 " + TruncatedMarker(2), "1 c", "1 d"}, b.logLines(t, ct.ID, 1))
	require.JSONEq(t, "20", string(b.get(t, ct.ID).Progress))
	// Unnumbered writes (0) are not checked: each lands.
	for range 2 {
		res, err := write(0, "", "e")()
		require.NoError(t, err)
		require.Equal(t, ProgressWritten, res.Status)
	}
	require.Equal(t, []string{"1 " + TruncatedMarker(4), "1 e", "1 e"}, b.logLines(t, ct.ID, 1))
}

// TestProgressWindowRefusesFasterWrites: with a least interval, a write
// within it of the run's last one lands nothing and says how long to wait.
func TestProgressWindowRefusesFasterWrites(t *testing.T) {
	t.Parallel()
	b := newTestRDB(t)
	ct := b.claimOne(t, "pw", nil)
	w := &ProgressWrite{Queue: "pw", ID: ct.ID, Attempt: ct.Attempt, Seq: 1, Progress: []byte("1"), MinInterval: time.Second}
	res, err := b.r.WriteProgress(b.ctx, testSettings, b.now, w, DefaultLogCaps)
	require.NoError(t, err)
	require.Equal(t, ProgressWritten, res.Status)
	w.Seq, w.Progress = 2, []byte("2")
	res, err = b.r.WriteProgress(b.ctx, testSettings, b.now.Add(400*time.Millisecond), w, DefaultLogCaps)
	require.NoError(t, err)
	require.Equal(t, ProgressTooSoon, res.Status)
	require.Equal(t, 600*time.Millisecond, res.RetryAfter)
	require.JSONEq(t, "1", string(b.get(t, ct.ID).Progress))
	res, err = b.r.WriteProgress(b.ctx, testSettings, b.now.Add(time.Second), w, DefaultLogCaps)
	require.NoError(t, err)
	require.Equal(t, ProgressWritten, res.Status)
	require.JSONEq(t, "2", string(b.get(t, ct.ID).Progress))
}

// TestLogCapsKeepTheNewestLines: past the line or byte cap the oldest
// lines go, and a page starts with the marker counting them.
func TestLogCapsKeepTheNewestLines(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name    string
		caps    LogCaps
		batches [][]string
		dropped int64
		want    []string
	}{
		{"lines over two writes", LogCaps{Lines: 3, Bytes: 1 << 20}, [][]string{{"a", "b"}, {"c", "d", "e"}}, 2,
			[]string{"c", "d", "e"}},
		{"one write over the cap", LogCaps{Lines: 2, Bytes: 1 << 20}, [][]string{{"a", "b", "c", "d"}}, 2,
			[]string{"c", "d"}},
		// Each stored entry is "0 x": 3 bytes.
		{"bytes", LogCaps{Lines: 100, Bytes: 7}, [][]string{{"a", "b"}, {"c"}}, 1, []string{"b", "c"}},
		{"nothing dropped", LogCaps{Lines: 5, Bytes: 1 << 20}, [][]string{{"a"}, {"b"}}, 0, []string{"a", "b"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			b := newTestRDB(t)
			ct := b.claimOne(t, "caps", nil)
			var dropped int64
			for i, batch := range tc.batches {
				w := &ProgressWrite{Queue: "caps", ID: ct.ID, Attempt: ct.Attempt, Seq: int64(i + 1)}
				for _, l := range batch {
					w.Lines = append(w.Lines, LogEntry{TS: TaskIDTime(ct.ID), Line: l})
				}
				res, err := b.r.WriteProgress(b.ctx, testSettings, b.now, w, tc.caps)
				require.NoError(t, err)
				require.Equal(t, ProgressWritten, res.Status)
				dropped += res.Dropped
			}
			require.Equal(t, tc.dropped, dropped)
			var want []string
			if tc.dropped > 0 {
				want = append(want, "1 "+TruncatedMarker(tc.dropped))
			}
			for _, l := range tc.want {
				want = append(want, "1 "+l)
			}
			require.Equal(t, want, b.logLines(t, ct.ID, 1))
		})
	}
}

// TestLogPagesResumeAtTheCursor: pages of two lines walk the log; the
// last cursor picks up lines written later, and a read of every attempt
// goes on to the next attempt's lines.
func TestLogPagesResumeAtTheCursor(t *testing.T) {
	t.Parallel()
	b := newTestRDB(t)
	ct := b.claimOne(t, "pages", nil)
	b.progress(t, testSettings, ct, 1, "", "a", "b", "c")
	var got []string
	cursor := ""
	for range 3 {
		page, err := b.r.TaskLogs(b.ctx, ct.ID, 0, cursor, 2)
		require.NoError(t, err)
		for _, it := range page.Items {
			got = append(got, it.Line)
		}
		require.NotEmpty(t, page.NextCursor)
		cursor = page.NextCursor
	}
	require.Equal(t, []string{"a", "b", "c"}, got)
	// A retry: attempt 2 logs; the same cursor goes on there.
	require.NoError(t, b.r.FinishRetry(b.ctx, finishArgsOf(ct, b.now), testSettings, 0, "Boom", "again"))
	_, err := b.r.Promote(b.ctx, "pages", testSettings, b.now.Add(time.Second))
	require.NoError(t, err)
	cr, err := b.r.Claim(b.ctx, "pages", testSettings, 1, b.now.Add(time.Second), "c2")
	require.NoError(t, err)
	require.Len(t, cr.Tasks, 1)
	b.progress(t, testSettings, cr.Tasks[0], 1, "", "d")
	page, err := b.r.TaskLogs(b.ctx, ct.ID, 0, cursor, 10)
	require.NoError(t, err)
	require.Len(t, page.Items, 1)
	require.Equal(t, dtqtype.LogLine{Attempt: 2, TS: page.Items[0].TS, Line: "d"}, page.Items[0])
	_, err = b.r.TaskLogs(b.ctx, ct.ID, 1, "garbage", 10)
	require.ErrorIs(t, err, ErrBadCursor)
	_, err = b.r.TaskLogs(b.ctx, NewTaskID(1, b.now), 0, "", 10)
	require.ErrorIs(t, err, ErrNotFound)
}

// TestLogCursorsNotAnsweredAreRefused: a cursor names an attempt a page
// read and a line no further than that attempt logged; a forged one
// (past the attempts or past the lines) is ErrBadCursor, never a page.
func TestLogCursorsNotAnsweredAreRefused(t *testing.T) {
	t.Parallel()
	b := newTestRDB(t)
	ct := b.claimOne(t, "forged", nil)
	b.progress(t, testSettings, ct, 1, "", "a", "b", "c")
	for _, tc := range []struct {
		attempt int
		cursor  string
		ok      bool
	}{
		{0, "1:3", true},
		{1, "1:0", true},
		{2, "2:0", true}, // an attempt that logged nothing yet: its page answers 2:0
		{0, "99:99", false},
		{0, "2:0", false},
		{0, "1:4", false},
		{1, "1:99", false},
		{2, "2:1", false},
		{3, "2:0", false},
	} {
		_, err := b.r.TaskLogs(b.ctx, ct.ID, tc.attempt, tc.cursor, 10)
		if tc.ok {
			require.NoError(t, err, "attempt %d cursor %s", tc.attempt, tc.cursor)
			continue
		}
		require.ErrorIs(t, err, ErrBadCursor, "attempt %d cursor %s", tc.attempt, tc.cursor)
	}
}

// TestLogsFollowTheTaskRetention: every way a task ends gives its logs the
// task's retention (or deletes them with it), a succeeded task's compact
// record keeps progress and lg, and a DLQ requeue keeps the logs while
// the task is live again.
func TestLogsFollowTheTaskRetention(t *testing.T) {
	t.Parallel()
	as := &AdminSettings{EventsMaxLen: 1000, FailedRetention: time.Hour, IdempotencyTTL: time.Hour, DLQEnabled: true, AuditMaxLen: 100}
	zero := *testSettings
	zero.SucceededRetention, zero.FailedRetention = 0, 0
	noDLQ := *testSettings
	noDLQ.DLQEnabled = false
	for _, tc := range []struct {
		name string
		end  func(t *testing.T, b *testRDB, ct ClaimedTask)
		kept bool // the logs have a TTL (else they are gone)
	}{
		{"succeeded", func(t *testing.T, b *testRDB, ct ClaimedTask) {
			errs, err := b.r.FinishSucceeded(b.ctx, ct.Queue, testSettings, b.now, []Success{{ID: ct.ID, Attempt: ct.Attempt}})
			require.NoError(t, err)
			require.NoError(t, errs[0])
		}, true},
		{"succeeded, retention 0", func(t *testing.T, b *testRDB, ct ClaimedTask) {
			errs, err := b.r.FinishSucceeded(b.ctx, ct.Queue, &zero, b.now, []Success{{ID: ct.ID, Attempt: ct.Attempt}})
			require.NoError(t, err)
			require.NoError(t, errs[0])
		}, false},
		{"failed", func(t *testing.T, b *testRDB, ct ClaimedTask) {
			require.NoError(t, b.r.FinishDead(b.ctx, finishArgsOf(ct, b.now), &noDLQ, "Permanent", "no", false))
		}, true},
		{"failed, retention 0", func(t *testing.T, b *testRDB, ct ClaimedTask) {
			s := zero
			s.DLQEnabled = false
			require.NoError(t, b.r.FinishDead(b.ctx, finishArgsOf(ct, b.now), &s, "Permanent", "no", false))
		}, false},
		{"cancelled while running", func(t *testing.T, b *testRDB, ct ClaimedTask) {
			_, _, err := b.r.CancelTask(b.ctx, ct.Queue, ct.ID, as, b.now, "test")
			require.NoError(t, err)
			require.ErrorIs(t, b.r.FinishRetry(b.ctx, finishArgsOf(ct, b.now), testSettings, time.Second, "Boom", "x"), ErrCancelWon)
		}, true},
		{"cancelled while retrying", func(t *testing.T, b *testRDB, ct ClaimedTask) {
			require.NoError(t, b.r.FinishRetry(b.ctx, finishArgsOf(ct, b.now), testSettings, time.Hour, "Boom", "x"))
			_, _, err := b.r.CancelTask(b.ctx, ct.Queue, ct.ID, as, b.now, "test")
			require.NoError(t, err)
		}, true},
		{"dead-lettered, then discarded", func(t *testing.T, b *testRDB, ct ClaimedTask) {
			require.NoError(t, b.r.FinishDead(b.ctx, finishArgsOf(ct, b.now), testSettings, "Permanent", "no", false))
			_, err := b.r.DLQDiscard(b.ctx, ct.Queue, ct.ID, as, b.now)
			require.NoError(t, err)
		}, true},
		{"lease expired, no attempts left", func(t *testing.T, b *testRDB, ct ClaimedTask) {
			_, err := b.r.Reclaim(b.ctx, ct.Queue, &noDLQ, 10, b.now.Add(time.Hour), "n2", nil)
			require.NoError(t, err)
			require.Equal(t, dtqtype.StatusFailed, b.get(t, ct.ID).Status)
		}, true},
		{"deleted", func(t *testing.T, b *testRDB, ct ClaimedTask) {
			require.NoError(t, b.r.FinishDead(b.ctx, finishArgsOf(ct, b.now), &noDLQ, "Permanent", "no", false))
			st, _, err := b.r.DeleteTask(b.ctx, ct.Queue, ct.ID, b.now)
			require.NoError(t, err)
			require.Equal(t, "deleted", st)
		}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			b := newTestRDB(t)
			ct := b.claimOne(t, "ret", func(nt *NewTask) { nt.MaxAttempts = 1 })
			require.Equal(t, ProgressWritten, b.progress(t, testSettings, ct, 1, `{"step":"x"}`, "line").Status)
			logKey := b.keys.TaskLog("ret", ct.ID, ct.Attempt)
			ttl, err := b.c.PTTL(b.ctx, logKey).Result()
			require.NoError(t, err)
			require.Equal(t, time.Duration(-1), ttl, "a live task's log has no TTL")
			tc.end(t, b, ct)
			n, err := b.c.Exists(b.ctx, logKey).Result()
			require.NoError(t, err)
			if !tc.kept {
				require.Zero(t, n, "the log must go with the task")
				return
			}
			require.Equal(t, int64(1), n)
			logTTL, err := b.c.PTTL(b.ctx, logKey).Result()
			require.NoError(t, err)
			taskTTL, err := b.c.PTTL(b.ctx, b.keys.Task("ret", ct.ID)).Result()
			require.NoError(t, err)
			require.Positive(t, logTTL)
			require.InDelta(t, taskTTL.Milliseconds(), logTTL.Milliseconds(), 1000, "the log expires with its task")
			ti := b.get(t, ct.ID)
			require.JSONEq(t, `{"step":"x"}`, string(ti.Progress))
			require.Equal(t, 1, ti.LogAttempts)
			require.Equal(t, []string{"1 line"}, b.logLines(t, ct.ID, 0))
		})
	}

	t.Run("dlq requeue keeps the logs live", func(t *testing.T) {
		t.Parallel()
		b := newTestRDB(t)
		ct := b.claimOne(t, "rq", func(nt *NewTask) { nt.MaxAttempts = 1 })
		b.progress(t, testSettings, ct, 1, "", "first run")
		require.NoError(t, b.r.FinishDead(b.ctx, finishArgsOf(ct, b.now), testSettings, "Permanent", "no", false))
		_, err := b.r.DLQDiscard(b.ctx, "rq", ct.ID, as, b.now)
		require.NoError(t, err)
		// Discarded: a TTL. Dead-letter it again through a fresh one.
		b2 := b.claimOne(t, "rq", func(nt *NewTask) { nt.MaxAttempts = 1 })
		b.progress(t, testSettings, b2, 1, "", "first run")
		require.NoError(t, b.r.FinishDead(b.ctx, finishArgsOf(b2, b.now), testSettings, "Permanent", "no", false))
		st, err := b.r.DLQRequeue(b.ctx, "rq", b2.ID, as, b.now, time.Time{})
		require.NoError(t, err)
		require.Equal(t, "requeued", st)
		ttl, err := b.c.PTTL(b.ctx, b.keys.TaskLog("rq", b2.ID, 1)).Result()
		require.NoError(t, err)
		require.Equal(t, time.Duration(-1), ttl)
		// The new run's first write (sequence 1 again) lands.
		cr, err := b.r.Claim(b.ctx, "rq", testSettings, 1, b.now, "c9")
		require.NoError(t, err)
		require.Len(t, cr.Tasks, 1)
		require.Equal(t, ProgressWritten, b.progress(t, testSettings, cr.Tasks[0], 1, "", "second run").Status)
		require.Equal(t, []string{"1 first run", "1 second run"}, b.logLines(t, b2.ID, 1))
	})
}

// TestLogLineMemory measures what Redis stores per log line: a full log
// of 1,000 lines of 100 bytes (MEMORY USAGE of the list), per line.
func TestLogLineMemory(t *testing.T) {
	t.Parallel()
	b := newTestRDB(t)
	ct := b.claimOne(t, "mem", nil)
	line := strings.Repeat("x", 100)
	var seq int64
	for i := 0; i < 1000; i += 100 {
		w := &ProgressWrite{Queue: "mem", ID: ct.ID, Attempt: ct.Attempt, Seq: seq + 1}
		seq++
		for j := range 100 {
			w.Lines = append(w.Lines, LogEntry{TS: b.now.Add(time.Duration(i+j) * time.Millisecond), Line: line})
		}
		res, err := b.r.WriteProgress(b.ctx, testSettings, b.now, w, DefaultLogCaps)
		require.NoError(t, err)
		require.Equal(t, ProgressWritten, res.Status)
	}
	used, err := b.c.MemoryUsage(b.ctx, b.keys.TaskLog("mem", ct.ID, ct.Attempt), 0).Result()
	require.NoError(t, err)
	perLine := float64(used) / 1000
	t.Logf("log memory: %d bytes for 1000 lines of 100 bytes: %.1f bytes per line (%.1f over the line)", used, perLine, perLine-100)
	// A line costs its bytes, its time offset and a few bytes of list
	// overhead: well under twice its size.
	require.Less(t, perLine, 130.0)
}
