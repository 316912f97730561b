package rdb

import (
	"context"
	"crypto/sha256"
	"strconv"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"

	"github.com/dtq-io/dtq/dtqtype"
	"github.com/dtq-io/dtq/internal/redistest"
)

// testRDB is what an ingest test needs.
type testRDB struct {
	ctx   context.Context
	r     *RDB
	c     *redis.Client
	admin *redis.Client // the test's own reads that the restricted c may not send (KEYS, SCAN, CONFIG)
	keys  Keys
	now   time.Time
	opt   IngestOptions
}

func newTestRDB(t *testing.T) *testRDB {
	t.Helper()
	s := redistest.New(t)
	redistest.CheckSlots(t, s.Client, HashSlot)
	r := New(s.Client, s.Prefix)
	return &testRDB{
		ctx: context.Background(), r: r, c: s.Client, admin: s.Admin, keys: r.Keys(),
		now: time.Now(), opt: IngestOptions{MaxDepth: 100, EventsMaxLen: 1000, RecentCap: 1000},
	}
}

// newAdminTestRDB is newTestRDB with the RDB on the server's default
// user, for what needs a command the restricted one is denied: rebuilding
// a lost queue registry searches the keyspace with SCAN.
func newAdminTestRDB(t *testing.T) *testRDB {
	t.Helper()
	b := newTestRDB(t)
	b.r, b.c = New(b.admin, b.keys.Prefix()), b.admin
	return b
}

// testTask returns a valid queued task; key "" means no idempotency key.
func testTask(queueNum uint16, now time.Time, key string) NewTask {
	return NewTask{
		ID: NewTaskID(queueNum, now), Type: "echo", Payload: []byte(`{"n":1}`), Priority: 5,
		MaxAttempts: 5, TimeoutMS: 30000, IdempotencyKey: key, AvailableAt: now.UnixMilli(),
		Metadata: []byte("{}"), Fingerprint: "fp-" + key, IdemTTL: 3600, CreatedAt: now.UnixMilli(),
	}
}

func (b *testRDB) task(t *testing.T, queue, key string) NewTask {
	t.Helper()
	num, err := b.r.QueueNumber(b.ctx, queue)
	require.NoError(t, err)
	return testTask(num, b.now, key)
}

func (b *testRDB) ingest(t *testing.T, queue string, tasks ...NewTask) []IngestResult {
	t.Helper()
	res, err := b.r.Ingest(b.ctx, queue, b.now, b.opt, tasks)
	require.NoError(t, err)
	require.Len(t, res, len(tasks))
	return res
}

func TestIngestQueuedTask(t *testing.T) {
	t.Parallel()
	b := newTestRDB(t)
	nt := b.task(t, "q", "")
	nt.Priority = 7
	nt.Metadata = []byte(`{"trace":"x"}`)
	res := b.ingest(t, "q", nt)
	require.Equal(t, IngestResult{Outcome: Created, TaskID: nt.ID, Status: dtqtype.StatusQueued}, res[0])

	h, err := b.c.HGetAll(b.ctx, b.keys.Task("q", nt.ID)).Result()
	require.NoError(t, err)
	entries, err := b.c.XRange(b.ctx, b.keys.Stream("q", 7), "-", "+").Result()
	require.NoError(t, err)
	require.Len(t, entries, 1)
	// A queued task's payload and metadata ride in its stream entry, and
	// what the claim needs of its hash (c).
	ms := strconv.FormatInt(b.now.UnixMilli(), 10)
	require.Equal(t, map[string]any{"t": nt.ID, "a": "1", "p": `{"n":1}`, "m": `{"trace":"x"}`,
		"c": "echo\t30000\t5\t" + createdUnlessID(nt.ID, nt.CreatedAt) + "\t\t"}, entries[0].Values)
	require.Equal(t, map[string]string{
		"type": "echo", "priority": "7", "max_attempts": "5", "attempt": "1",
		"timeout_ms": "30000", "status": "queued", "created_at": ms, // available_at = created_at: not stored
		"stream_id": entries[0].ID,
	}, h)
	got, err := b.r.GetTask(b.ctx, nt.ID)
	require.NoError(t, err)
	require.JSONEq(t, `{"n":1}`, string(got.Payload))
	require.JSONEq(t, `{"trace":"x"}`, string(got.Metadata))
	require.Equal(t, time.Duration(-1), b.c.TTL(b.ctx, b.keys.Task("q", nt.ID)).Val())

	require.Equal(t, "1", b.c.Get(b.ctx, b.keys.Depth("q")).Val())
	require.Equal(t, []string{recentMember(nt.ID)}, b.c.LRange(b.ctx, b.keys.Recent("q"), 0, -1).Val())
	require.Zero(t, b.c.ZCard(b.ctx, b.keys.Schedule("q")).Val())
	require.Zero(t, b.c.ZCard(b.ctx, b.keys.Expiry("q")).Val())
	evs, err := b.c.XRange(b.ctx, b.keys.Events("q"), "-", "+").Result()
	require.NoError(t, err)
	require.Len(t, evs, 1)
	// Every entry has the same fields; a task event's ts counts from the
	// time in its id.
	tsOffset := strconv.FormatInt(b.now.UnixMilli()-TaskIDTime(nt.ID).UnixMilli(), 10)
	require.Equal(t, map[string]any{"type": "TASK_QUEUED", "task_id": nt.ID, "task_type": "echo", "attempt": "1",
		"ts": tsOffset, "worker_id": "", "meta": ""}, evs[0].Values)
}

func TestIngestDelayedExpiringKeyedTask(t *testing.T) {
	t.Parallel()
	b := newTestRDB(t)
	nt := b.task(t, "q", "order-7")
	nt.AvailableAt = b.now.Add(time.Minute).UnixMilli()
	nt.ExpiresAt = b.now.Add(time.Hour).UnixMilli()
	res := b.ingest(t, "q", nt)
	require.Equal(t, dtqtype.StatusPending, res[0].Status)

	h := b.c.HGetAll(b.ctx, b.keys.Task("q", nt.ID)).Val()
	require.Equal(t, "pending", h["status"])
	require.Equal(t, "order-7", h["idem_key"])
	require.Equal(t, "fp-order-7", h["fingerprint"], "kept: a replay asking for other work is a mismatch")
	require.Equal(t, strconv.FormatInt(nt.ExpiresAt, 10), h["expires_at"])
	require.NotContains(t, h, "stream_id")
	require.NotContains(t, h, "metadata", "an empty metadata object is not stored")
	for band := range NumBands {
		require.Zero(t, b.c.XLen(b.ctx, b.keys.Stream("q", band)).Val())
	}
	require.Equal(t, float64(nt.AvailableAt), b.c.ZScore(b.ctx, b.keys.Schedule("q"), nt.ID).Val())
	require.Equal(t, float64(nt.ExpiresAt), b.c.ZScore(b.ctx, b.keys.Expiry("q"), nt.ID).Val())
	require.Equal(t, "TASK_PENDING", b.c.XRange(b.ctx, b.keys.Events("q"), "-", "+").Val()[0].Values["type"])

	// The record is the task id; the fingerprint and the state live in the
	// task hash.
	require.Equal(t, nt.ID, b.c.Get(b.ctx, b.keys.Idempotency("q", "order-7")).Val())
	ttl := b.c.TTL(b.ctx, b.keys.Idempotency("q", "order-7")).Val()
	require.InDelta(t, float64(time.Hour), float64(ttl), float64(2*time.Second))
}

func TestIngestBatchChecksEachTaskOnItsOwn(t *testing.T) {
	t.Parallel()
	b := newTestRDB(t)
	b.opt.MaxDepth = 3
	first := b.task(t, "q", "a")
	again := b.task(t, "q", "a")
	other := b.task(t, "q", "a")
	other.Fingerprint = "different"
	plain := b.task(t, "q", "")
	keyed := b.task(t, "q", "b")
	over := b.task(t, "q", "")
	overKeyed := b.task(t, "q", "c")
	res := b.ingest(t, "q", first, again, other, plain, keyed, over, overKeyed)
	require.Equal(t, []IngestOutcome{Created, InProgress, Mismatch, Created, Created, QueueFull, QueueFull}, outcomes(res))
	require.Equal(t, first.ID, res[1].TaskID)
	require.Equal(t, first.ID, res[2].TaskID)
	require.EqualValues(t, 3, res[5].Depth)

	// Refused tasks wrote nothing.
	for _, nt := range []NewTask{again, other, over, overKeyed} {
		require.Zero(t, b.c.Exists(b.ctx, b.keys.Task("q", nt.ID)).Val())
	}
	require.Zero(t, b.c.Exists(b.ctx, b.keys.Idempotency("q", "c")).Val())
	require.Equal(t, "3", b.c.Get(b.ctx, b.keys.Depth("q")).Val())
	require.EqualValues(t, 3, b.c.XLen(b.ctx, b.keys.Events("q")).Val())
	require.EqualValues(t, 3, b.c.LLen(b.ctx, b.keys.Recent("q")).Val())
}

func TestIngestReplayOfFinishedTask(t *testing.T) {
	t.Parallel()
	b := newTestRDB(t)
	nt := b.task(t, "q", "k")
	b.ingest(t, "q", nt)
	require.NoError(t, b.c.HSet(b.ctx, b.keys.Task("q", nt.ID), "status", "succeeded").Err())
	require.NoError(t, b.c.Set(b.ctx, b.keys.Result("q", nt.ID), `{"sent":true}`, time.Hour).Err())
	markRecord(t, b.r, "q", "k", "completed")
	events := b.c.XLen(b.ctx, b.keys.Events("q")).Val()

	res := b.ingest(t, "q", b.task(t, "q", "k"))
	require.Equal(t, Duplicate, res[0].Outcome)
	require.Equal(t, nt.ID, res[0].TaskID)
	info := res[0].Task
	require.Equal(t, nt.ID, info.ID)
	require.Equal(t, "q", info.Queue)
	require.Equal(t, dtqtype.StatusSucceeded, info.Status)
	require.JSONEq(t, `{"sent":true}`, string(info.Result))
	require.NotNil(t, info.IdempotencyKey)
	require.Equal(t, "k", *info.IdempotencyKey)
	require.Equal(t, events, b.c.XLen(b.ctx, b.keys.Events("q")).Val())
	require.Equal(t, "1", b.c.Get(b.ctx, b.keys.Depth("q")).Val())

	// Without its result key the replay says the result expired.
	require.NoError(t, b.c.HSet(b.ctx, b.keys.Task("q", nt.ID), "has_result", "1").Err())
	require.NoError(t, b.c.Del(b.ctx, b.keys.Result("q", nt.ID)).Err())
	res = b.ingest(t, "q", b.task(t, "q", "k"))
	require.True(t, res[0].Task.ResultExpired)
	require.Nil(t, res[0].Task.Result)
}

func TestIngestStaleRecordIsReplaced(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name  string
		spoil func(b *testRDB, first NewTask)
	}{
		{"task hash gone", func(b *testRDB, first NewTask) {
			b.c.Del(b.ctx, b.keys.Task("q", first.ID))
		}},
		{"record names no task", func(b *testRDB, first NewTask) {
			b.c.Set(b.ctx, b.keys.Idempotency("q", "k"), "not a task id", time.Hour)
		}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			b := newTestRDB(t)
			first := b.task(t, "q", "k")
			b.ingest(t, "q", first)
			c.spoil(b, first)
			next := b.task(t, "q", "k")
			next.Fingerprint = "changed" // a stale record is no mismatch
			res := b.ingest(t, "q", next)
			require.Equal(t, Created, res[0].Outcome)
			require.Equal(t, next.ID, res[0].TaskID)
			require.Equal(t, next.ID, b.c.Get(b.ctx, b.keys.Idempotency("q", "k")).Val())
			require.Equal(t, "changed", b.c.HGet(b.ctx, b.keys.Task("q", next.ID), "fingerprint").Val())
		})
	}
}

func TestIngestRecentIndexIsCapped(t *testing.T) {
	t.Parallel()
	b := newTestRDB(t)
	b.opt.RecentCap = 3
	var ids []string
	for range 5 {
		nt := b.task(t, "q", "")
		ids = append(ids, recentMember(nt.ID))
		b.ingest(t, "q", nt)
	}
	require.Equal(t, []string{ids[4], ids[3], ids[2]}, b.c.LRange(b.ctx, b.keys.Recent("q"), 0, -1).Val(), "the newest ids stay, newest first")
	require.Equal(t, "5", b.c.Get(b.ctx, b.keys.Depth("q")).Val())
}

func TestIngestQueuesAreIndependent(t *testing.T) {
	t.Parallel()
	b := newTestRDB(t)
	b.opt.MaxDepth = 1
	b.ingest(t, "a", b.task(t, "a", "k"))
	res := b.ingest(t, "b", b.task(t, "b", "k"))
	require.Equal(t, Created, res[0].Outcome, "depth and keys are per queue")
	require.Equal(t, QueueFull, b.ingest(t, "a", b.task(t, "a", ""))[0].Outcome)
	require.Equal(t, "1", b.c.Get(b.ctx, b.keys.Depth("b")).Val())
}

// TestIngestFingerprintStoredAsBytes: a SHA-256 fingerprint in hex is
// stored as its 32 bytes and compared as such.
func TestIngestFingerprintStoredAsBytes(t *testing.T) {
	t.Parallel()
	b := newTestRDB(t)
	sum := sha256.Sum256([]byte("work"))
	first := b.task(t, "q", "k")
	first.Fingerprint = string(sum[:])
	b.ingest(t, "q", first)
	tk := b.keys.Task("q", first.ID)
	require.Equal(t, string(sum[:]), b.c.HGet(b.ctx, tk, "fingerprint").Val())

	again := b.task(t, "q", "k")
	again.Fingerprint = string(sum[:])
	require.Equal(t, InProgress, b.ingest(t, "q", again)[0].Outcome)
	other := sha256.Sum256([]byte("other work"))
	again.Fingerprint = string(other[:])
	require.Equal(t, Mismatch, b.ingest(t, "q", again)[0].Outcome)
}

// TestIngestDepthGateComparesAsNumbers: the gate compares the counter and
// the limit as integers (it does so as text: longer is larger), and a
// counter that drifted below zero lets a task in.
func TestIngestDepthGateComparesAsNumbers(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		depth string
		want  IngestOutcome
	}{{"9", Created}, {"10", QueueFull}, {"11", QueueFull}, {"100", QueueFull}, {"-1", Created}, {"0", Created}} {
		t.Run(c.depth, func(t *testing.T) {
			t.Parallel()
			b := newTestRDB(t)
			b.opt.MaxDepth = 10
			require.NoError(t, b.c.Set(b.ctx, b.keys.Depth("q"), c.depth, 0).Err())
			res := b.ingest(t, "q", b.task(t, "q", ""))
			require.Equal(t, c.want, res[0].Outcome)
			if c.want == QueueFull {
				require.Equal(t, c.depth, strconv.FormatInt(res[0].Depth, 10))
			}
		})
	}
}

// createdUnlessID is created_at as the band entry's field c holds it: ""
// when it is the time in the id.
func createdUnlessID(id string, created int64) string {
	if TaskIDTime(id).UnixMilli() == created {
		return ""
	}
	return strconv.FormatInt(created, 10)
}

// TestIngestEveryOptionalField: a task carrying every optional field the
// call announces by letter (ingest.lua's header), between two plain tasks
// of the same call, is written field for field; the tasks after it read
// their own arguments; the call sent again answers the same.
func TestIngestEveryOptionalField(t *testing.T) {
	t.Parallel()
	b := newTestRDB(t)
	plain1, full, plain2 := b.task(t, "q", ""), b.task(t, "q", "order-9"), b.task(t, "q", "")
	full.ID = NewTaskID(mustNum(t, b, "q"), b.now.Add(time.Millisecond))
	plain2.ID = NewTaskID(mustNum(t, b, "q"), b.now.Add(2*time.Millisecond))
	full.AvailableAt = b.now.Add(time.Minute).UnixMilli()
	full.ExpiresAt = b.now.Add(time.Hour).UnixMilli()
	full.Metadata = []byte(`{"trace":"t"}`)
	full.ConcurrencyKey = "tenant-1"
	full.Retention = 120
	full.KeepPayload = true
	full.Dedup = &DedupSpec{Key: "k1", Mode: "drop"}
	plain2.Type, plain2.Priority = "other", 2
	b.opt.CancelledRetention = time.Hour

	tasks := []NewTask{plain1, full, plain2}
	res := b.ingest(t, "q", tasks...)
	want := []IngestResult{
		{Outcome: Created, TaskID: plain1.ID, Status: dtqtype.StatusQueued},
		{Outcome: Created, TaskID: full.ID, Status: dtqtype.StatusPending},
		{Outcome: Created, TaskID: plain2.ID, Status: dtqtype.StatusQueued},
	}
	require.Equal(t, want, res)

	h := b.c.HGetAll(b.ctx, b.keys.Task("q", full.ID)).Val()
	require.Equal(t, map[string]string{
		"type": "echo", "priority": "5", "max_attempts": "5", "attempt": "1", "timeout_ms": "30000",
		"status": "pending", "created_at": strconv.FormatInt(full.CreatedAt, 10),
		"available_at": strconv.FormatInt(full.AvailableAt, 10), "idem_key": "order-9", "fingerprint": "fp-order-9",
		"expires_at": strconv.FormatInt(full.ExpiresAt, 10), "dk": b.keys.DedupPrefix("q") + "k1",
		"payload": `{"n":1}`, "metadata": `{"trace":"t"}`, "ckey": "tenant-1", "ret": "120", "keep": "1",
	}, h)
	require.Equal(t, full.ID, b.c.Get(b.ctx, b.keys.Idempotency("q", "order-9")).Val())
	require.Equal(t, full.ID, b.c.HGet(b.ctx, b.keys.DedupPrefix("q")+"k1", "id").Val())
	require.Equal(t, float64(full.ExpiresAt), b.c.ZScore(b.ctx, b.keys.Expiry("q"), full.ID).Val())

	h2 := b.c.HGetAll(b.ctx, b.keys.Task("q", plain2.ID)).Val()
	require.Equal(t, "other", h2["type"])
	require.Equal(t, "2", h2["priority"])
	require.NotContains(t, h2, "ckey")
	require.Equal(t, "3", b.c.Get(b.ctx, b.keys.Depth("q")).Val())

	again, err := b.r.Ingest(b.ctx, "q", b.now, b.opt, tasks)
	require.NoError(t, err)
	require.Equal(t, want, again, "a call sent again answers what its first run answered")
	require.Equal(t, "3", b.c.Get(b.ctx, b.keys.Depth("q")).Val(), "and writes nothing")
}

func mustNum(t *testing.T, b *testRDB, queue string) uint16 {
	t.Helper()
	num, err := b.r.QueueNumber(b.ctx, queue)
	require.NoError(t, err)
	return num
}
