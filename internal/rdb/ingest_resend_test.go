package rdb

import (
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/dtq-io/dtq/dtqtype"
)

// An ingest call sent again after its reply was lost (go-redis resends after
// a broken connection, and so does the client) answers what its first run
// answered and writes nothing more: one stream or schedule entry, one
// creation event, one listing entry and one depth per task.
func TestIngestSentTwiceAnswersTheSame(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name  string
		key   string
		delay time.Duration
		want  dtqtype.Status
	}{
		{"keyless queued", "", 0, dtqtype.StatusQueued},
		{"keyless delayed", "", time.Hour, dtqtype.StatusPending},
		{"keyed queued", "k-queued", 0, dtqtype.StatusQueued},
		{"keyed delayed", "k-delayed", time.Hour, dtqtype.StatusPending},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			b := newTestRDB(t)
			nt := b.task(t, "q", tc.key)
			nt.AvailableAt = b.now.Add(tc.delay).UnixMilli()
			first := b.ingest(t, "q", nt)
			again := b.ingest(t, "q", nt)
			want := IngestResult{Outcome: Created, TaskID: nt.ID, Status: tc.want}
			require.Equal(t, want, first[0])
			require.Equal(t, want, again[0], "the resent call must answer what the first run answered")
			b.requireWrittenOnce(t, "q", 1, 1, tc.delay > 0)
		})
	}
}

// A batch sent again answers each task as the first run did, including a
// task the depth gate refused, and creates nothing twice.
func TestIngestBatchSentTwice(t *testing.T) {
	t.Parallel()
	b := newTestRDB(t)
	b.opt.MaxDepth = 3
	tasks := []NewTask{b.task(t, "q", ""), b.task(t, "q", "k1"), b.task(t, "q", ""), b.task(t, "q", "k2")}
	first := b.ingest(t, "q", tasks...)
	again := b.ingest(t, "q", tasks...)
	require.Equal(t, first, again)
	for i := range 3 {
		require.Equal(t, Created, first[i].Outcome, "task %d", i)
	}
	require.Equal(t, QueueFull, first[3].Outcome)
	b.requireWrittenOnce(t, "q", 3, 3, false)
	// The refused keyed task left no record: its key is free.
	n, err := b.c.Exists(b.ctx, b.keys.Idempotency("q", "k2")).Result()
	require.NoError(t, err)
	require.Zero(t, n)
}

// A keyed submission's record names its task: a resend that finds the record
// naming its own task answers created, never in progress; a different
// submission with the same key still sees the task as in progress.
func TestIngestResendIsNotInProgress(t *testing.T) {
	t.Parallel()
	b := newTestRDB(t)
	nt := b.task(t, "q", "k")
	b.ingest(t, "q", nt)
	res := b.ingest(t, "q", nt)
	require.Equal(t, Created, res[0].Outcome)
	other := b.task(t, "q", "k")
	res = b.ingest(t, "q", other)
	require.Equal(t, IngestResult{Outcome: InProgress, TaskID: nt.ID}, res[0])
}

// A keyless task deleted as soon as it ended (retention 0) leaves a marker,
// so that its ingest call, sent again after the task already ran, does not
// queue it a second time.
func TestIngestResendAfterTaskEndedAndWasDeleted(t *testing.T) {
	t.Parallel()
	b := newTestRDB(t)
	var nt NewTask
	ct := b.succeedOne(t, "q", testSettings, func(t *NewTask) { t.Retention = -1; nt = *t }, nil)
	require.Equal(t, nt.ID, ct.ID)
	n, err := b.c.Exists(b.ctx, b.keys.Task("q", nt.ID)).Result()
	require.NoError(t, err)
	require.Zero(t, n, "a task with retention 0 is deleted when it ends")
	ttl, err := b.c.PTTL(b.ctx, b.keys.TaskEnded("q", nt.ID)).Result()
	require.NoError(t, err)
	require.Positive(t, ttl, "the ended marker must expire")
	require.LessOrEqual(t, ttl, time.Minute)

	res := b.ingest(t, "q", nt)
	require.Equal(t, IngestResult{Outcome: Created, TaskID: nt.ID, Status: dtqtype.StatusQueued}, res[0])
	b.requireWrittenOnce(t, "q", 0, 1, false)
}

// requireWrittenOnce checks that queue holds live tasks and that made
// tasks were ever created, each written once: depth and band entries (or
// schedule entries when delayed) count the live tasks, creation events and
// listing entries the created ones.
func (b *testRDB) requireWrittenOnce(t *testing.T, queue string, live, made int, delayed bool) {
	t.Helper()
	depth, err := b.c.Get(b.ctx, b.keys.Depth(queue)).Int()
	require.NoError(t, err)
	require.Equal(t, live, depth, "depth")
	entries := 0
	for band := range 10 {
		l, err := b.c.XLen(b.ctx, b.keys.Stream(queue, band)).Result()
		require.NoError(t, err)
		entries += int(l)
	}
	sched, err := b.c.ZCard(b.ctx, b.keys.Schedule(queue)).Result()
	require.NoError(t, err)
	if delayed {
		require.Equal(t, int64(live), sched, "schedule entries")
		require.Zero(t, entries, "band entries")
	} else {
		require.Equal(t, live, entries, "band entries")
		require.Zero(t, sched, "schedule entries")
	}
	events, err := b.c.XRange(b.ctx, b.keys.Events(queue), "-", "+").Result()
	require.NoError(t, err)
	created := 0
	for _, e := range events {
		if e.Values["type"] == "TASK_QUEUED" || e.Values["type"] == "TASK_PENDING" {
			created++
		}
	}
	require.Equal(t, made, created, "creation events")
	listed, err := b.c.LLen(b.ctx, b.keys.Recent(queue)).Result()
	require.NoError(t, err)
	require.Equal(t, int64(made), listed, "listing entries")
	// The arrival counters (the autoscaling signal's) count a task created
	// due now once, however often its call is sent.
	arrived := 0
	for f, v := range b.c.HGetAll(b.ctx, b.keys.Stats(queue, minuteOf(b.now))).Val() {
		if len(f) > 1 && f[0] == 'a' && f[1] >= '0' && f[1] <= '9' {
			n, err := strconv.Atoi(v)
			require.NoError(t, err)
			arrived += n
		}
	}
	if delayed {
		require.Zero(t, arrived, "arrivals")
	} else {
		require.Equal(t, made, arrived, "arrivals")
	}
}

// SettleIngest answers a call whose every reply was lost: a task the call
// created is Created; one it did not create is Absent, and the call, should
// it still reach Redis afterwards, creates nothing. A later submission with
// the same key is new work.
func TestSettleIngest(t *testing.T) {
	t.Parallel()
	for _, key := range []string{"", "k"} {
		t.Run("key="+key, func(t *testing.T) {
			t.Parallel()
			b := newTestRDB(t)
			landed, lost := b.task(t, "q", ""), b.task(t, "q", key)
			b.ingest(t, "q", landed)
			res, err := b.r.SettleIngest(b.ctx, "q", b.now, b.opt, []NewTask{landed, lost})
			require.NoError(t, err)
			require.Equal(t, []IngestResult{
				{Outcome: Created, TaskID: landed.ID, Status: dtqtype.StatusQueued},
				{Outcome: Absent, TaskID: lost.ID},
			}, res)
			again, err := b.r.SettleIngest(b.ctx, "q", b.now, b.opt, []NewTask{landed, lost})
			require.NoError(t, err)
			require.Equal(t, res, again, "settling twice answers the same")

			// The lost call reaches Redis after all. Its answer reaches
			// nobody (a keyless one says created, a keyed one absent);
			// what matters is that it writes nothing.
			b.ingest(t, "q", lost)
			b.requireWrittenOnce(t, "q", 1, 1, false)
			if key != "" {
				fresh := b.task(t, "q", key)
				res := b.ingest(t, "q", fresh)
				require.Equal(t, IngestResult{Outcome: Created, TaskID: fresh.ID, Status: dtqtype.StatusQueued}, res[0])
			}
		})
	}
}
