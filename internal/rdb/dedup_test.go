package rdb

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/dtq-io/dtq/dtqtype"
)

// countEvents counts queue q's events of type typ.
func (b *testRDB) countEvents(t *testing.T, q, typ string) int {
	t.Helper()
	msgs, err := b.c.XRange(b.ctx, b.keys.Events(q), "-", "+").Result()
	require.NoError(t, err)
	n := 0
	for _, m := range msgs {
		if m.Values["type"] == typ {
			n++
		}
	}
	return n
}

// A collapsed submission sent again (its reply lost) answers collapsed into
// the same task, and writes nothing more: one TASK_DEDUPLICATED, the
// debounce pushed once. Settling it answers the same, never absent.
func TestDedupIngestSentTwice(t *testing.T) {
	t.Parallel()
	specs := []DedupSpec{
		{Key: "k", Mode: "drop"},
		{Key: "k", Mode: "throttle", TTL: 60000},
		{Key: "k", Mode: "debounce", Window: 5000, MaxWait: 60000},
	}
	for _, spec := range specs {
		for _, idem := range []string{"", "idem"} {
			t.Run(spec.Mode+"/"+idem, func(t *testing.T) {
				t.Parallel()
				b := newTestRDB(t)
				first := b.task(t, "q", "")
				first.Dedup = &spec
				if spec.Mode == "debounce" {
					first.AvailableAt = b.now.Add(5 * time.Second).UnixMilli()
				}
				require.Equal(t, Created, b.ingest(t, "q", first)[0].Outcome)
				second := b.task(t, "q", idem)
				second.Dedup = &spec
				second.Payload = []byte(`{"n":2}`)
				a := b.ingest(t, "q", second)[0]
				again := b.ingest(t, "q", second)[0]
				settled, err := b.r.SettleIngest(b.ctx, "q", b.now, b.opt, []NewTask{second})
				require.NoError(t, err)
				for _, r := range []IngestResult{a, again, settled[0]} {
					require.Equal(t, Deduplicated, r.Outcome)
					require.Equal(t, first.ID, r.TaskID)
					require.Equal(t, spec.Mode, r.Mode)
					require.NotNil(t, r.Task)
					require.Equal(t, "k", r.Task.DedupKey)
				}
				require.Equal(t, 1, b.countEvents(t, "q", "TASK_DEDUPLICATED"))
				n, err := b.c.Exists(b.ctx, b.keys.Task("q", second.ID)).Result()
				require.NoError(t, err)
				require.Zero(t, n, "the collapsed submission created no task")
				depth, err := b.c.Get(b.ctx, b.keys.Depth("q")).Int()
				require.NoError(t, err)
				require.Equal(t, 1, depth)
				if idem != "" {
					// The same key with other work is a mismatch, not a dedup answer.
					other := b.task(t, "q", idem)
					other.Dedup = &spec
					other.Fingerprint = "fp-other"
					require.Equal(t, Mismatch, b.ingest(t, "q", other)[0].Outcome)
				}
			})
		}
	}
}

// A replace sent again answers created, naming the task it replaced, and
// cancels that task once.
func TestDedupReplaceSentTwice(t *testing.T) {
	t.Parallel()
	b := newTestRDB(t)
	b.opt.CancelledRetention = time.Hour
	spec := &DedupSpec{Key: "k", Mode: "replace"}
	first := b.task(t, "q", "")
	first.Dedup = spec
	b.ingest(t, "q", first)
	second := b.task(t, "q", "")
	second.Dedup = spec
	a := b.ingest(t, "q", second)[0]
	require.Equal(t, IngestResult{Outcome: Created, TaskID: second.ID, Status: dtqtype.StatusQueued, Replaced: first.ID}, a)
	again := b.ingest(t, "q", second)[0]
	require.Equal(t, a, again, "the resent call answers what the first run answered")
	require.Equal(t, 1, b.countEvents(t, "q", "TASK_DEDUPLICATED"))
	require.Equal(t, 2, b.countEvents(t, "q", "TASK_QUEUED"))
	depth, err := b.c.Get(b.ctx, b.keys.Depth("q")).Int()
	require.NoError(t, err)
	require.Equal(t, 1, depth)
	xlen, err := b.c.XLen(b.ctx, b.keys.Stream("q", 5)).Result()
	require.NoError(t, err)
	require.Equal(t, int64(1), xlen, "the replaced task's entry went with it")
	h, err := b.c.HGetAll(b.ctx, b.keys.Task("q", first.ID)).Result()
	require.NoError(t, err)
	require.Equal(t, "cancelled", h["status"])
	require.JSONEq(t, `{"n":1}`, h["payload"], "the cancelled task keeps its payload")
	ttl, err := b.c.PTTL(b.ctx, b.keys.Task("q", first.ID)).Result()
	require.NoError(t, err)
	require.Greater(t, ttl, 59*time.Minute, "its retention started: the cancelled retention")
	retained, err := b.c.HGetAll(b.ctx, b.keys.Retained("q")).Result()
	require.NoError(t, err)
	require.Len(t, retained, 1)
	for field, n := range retained {
		require.Regexp(t, `^cancelled:\d+$`, field)
		require.Equal(t, "1", n, "counted once")
	}
}

// A refused submission (queue full) writes no dedup record, and the key's
// record is left as it was.
func TestDedupQueueFullLeavesRecord(t *testing.T) {
	t.Parallel()
	b := newTestRDB(t)
	b.opt.MaxDepth = 1
	spec := &DedupSpec{Key: "k", Mode: "drop"}
	filler := b.task(t, "q", "")
	b.ingest(t, "q", filler)
	nt := b.task(t, "q", "")
	nt.Dedup = spec
	require.Equal(t, QueueFull, b.ingest(t, "q", nt)[0].Outcome)
	n, err := b.c.Exists(b.ctx, b.keys.Dedup("q", "k")).Result()
	require.NoError(t, err)
	require.Zero(t, n)
}

// dedupKeyOf reads the key back from its record's name, whatever the key
// holds.
func TestDedupKeyOf(t *testing.T) {
	t.Parallel()
	k := NewKeys("dtq")
	for _, key := range []string{"k", "a:{b}:c", "}:", "by:task_type=\"x\"&payload.a=1"} {
		require.Equal(t, key, dedupKeyOf("q-1", k.Dedup("q-1", key)))
	}
}

// A collapsed keyless submission resent after its key's task is gone (a
// retention of 0, a delete by hand) is new work, as a keyed one with a
// stale record is: never an answer naming a task that is not there.
func TestDedupResendAfterTheTaskIsGone(t *testing.T) {
	t.Parallel()
	for _, idem := range []string{"", "idem"} {
		t.Run("key="+idem, func(t *testing.T) {
			t.Parallel()
			b := newTestRDB(t)
			spec := &DedupSpec{Key: "k", Mode: "drop"}
			first := b.task(t, "q", "")
			first.Dedup = spec
			b.ingest(t, "q", first)
			second := b.task(t, "q", idem)
			second.Dedup = spec
			require.Equal(t, Deduplicated, b.ingest(t, "q", second)[0].Outcome)
			require.NoError(t, b.c.Del(b.ctx, b.keys.Task("q", first.ID)).Err())
			again := b.ingest(t, "q", second)[0]
			require.Equal(t, IngestResult{Outcome: Created, TaskID: second.ID, Status: dtqtype.StatusQueued}, again)
			require.Equal(t, again, b.ingest(t, "q", second)[0], "and that answer holds when sent again")
		})
	}
}
