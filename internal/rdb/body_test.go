package rdb

import (
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/dtq-io/dtq/dtqtype"
)

// A queued task's payload and metadata ride in its band stream entry (see
// ingest.lua); every way the entry goes away must leave them in the hash.

func bodyTask(b *testRDB, t *testing.T, queue string) NewTask {
	nt := b.task(t, queue, "")
	nt.Payload = []byte(`{"body":"` + strings.Repeat("x", 100) + `"}`)
	nt.Metadata = []byte(`{"traceparent":"00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"}`)
	return nt
}

func requireBodyInHash(t *testing.T, b *testRDB, queue string, nt NewTask) {
	t.Helper()
	v := b.c.HMGet(b.ctx, b.keys.Task(queue, nt.ID), "payload", "metadata").Val()
	require.Equal(t, []any{string(nt.Payload), string(nt.Metadata)}, v)
}

func TestQueuedTaskHashIsListpack(t *testing.T) {
	t.Parallel()
	b := newTestRDB(t)
	nt := bodyTask(b, t, "q")
	b.ingest(t, "q", nt)
	// The test server runs Redis's default hash-max-listpack-value, 64: a
	// payload in the hash would make it a hashtable.
	require.Equal(t, map[string]string{"hash-max-listpack-value": "64"},
		b.admin.ConfigGet(b.ctx, "hash-max-listpack-value").Val())
	enc := b.c.ObjectEncoding(b.ctx, b.keys.Task("q", nt.ID)).Val()
	require.Equal(t, "listpack", enc)
	got, err := b.r.GetTask(b.ctx, nt.ID)
	require.NoError(t, err)
	require.Equal(t, string(nt.Payload), string(got.Payload))
	require.Equal(t, string(nt.Metadata), string(got.Metadata))
	list, err := b.r.ListTasks(b.ctx, &dtqtype.TaskListParams{Queue: "q", Limit: 10})
	require.NoError(t, err)
	require.Len(t, list.Items, 1)
	require.Equal(t, string(nt.Payload), string(list.Items[0].Payload))
}

func TestClaimMovesBodyIntoHash(t *testing.T) {
	t.Parallel()
	b := newTestRDB(t)
	require.NoError(t, b.r.EnsureGroups(b.ctx, "q"))
	nt := bodyTask(b, t, "q")
	b.ingest(t, "q", nt)
	cr, err := b.r.Claim(b.ctx, "q", testSettings, 10, b.now, "n1")
	require.NoError(t, err)
	require.Len(t, cr.Tasks, 1)
	require.Equal(t, string(nt.Payload), string(cr.Tasks[0].Payload))
	require.Equal(t, string(nt.Metadata), string(cr.Tasks[0].Metadata))
	requireBodyInHash(t, b, "q", nt)
	require.Zero(t, b.c.XLen(b.ctx, b.keys.Stream("q", 5)).Val(), "the claim trims the entry")
	got, err := b.r.GetTask(b.ctx, nt.ID)
	require.NoError(t, err)
	require.Equal(t, dtqtype.StatusRunning, got.Status)
	require.Equal(t, string(nt.Payload), string(got.Payload))
}

func TestBodyKeptWhenEntryIsRemoved(t *testing.T) {
	t.Parallel()
	as := &AdminSettings{EventsMaxLen: 1000, FailedRetention: time.Hour, IdempotencyTTL: time.Hour, DLQEnabled: true}
	for name, remove := range map[string]func(b *testRDB, t *testing.T, nt NewTask){
		"cancel": func(b *testRDB, t *testing.T, nt NewTask) {
			_, _, err := b.r.CancelTask(b.ctx, "q", nt.ID, as, b.now, "test")
			require.NoError(t, err)
		},
		"purge": func(b *testRDB, t *testing.T, nt NewTask) {
			n, err := b.r.PurgeQueue(b.ctx, "q", as, b.now)
			require.NoError(t, err)
			require.Equal(t, int64(1), n)
		},
		"expiry sweep": func(b *testRDB, t *testing.T, nt NewTask) {
			_, err := b.r.SweepExpired(b.ctx, "q", testSettings, b.now.Add(time.Hour))
			require.NoError(t, err)
		},
		"expiry at claim": func(b *testRDB, t *testing.T, nt NewTask) {
			require.NoError(t, b.r.EnsureGroups(b.ctx, "q"))
			cr, err := b.r.Claim(b.ctx, "q", testSettings, 10, b.now.Add(time.Hour), "n1")
			require.NoError(t, err)
			require.Empty(t, cr.Tasks)
		},
	} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			b := newTestRDB(t)
			nt := bodyTask(b, t, "q")
			nt.ExpiresAt = b.now.Add(time.Minute).UnixMilli()
			b.ingest(t, "q", nt)
			remove(b, t, nt)
			require.Zero(t, b.c.XLen(b.ctx, b.keys.Stream("q", 5)).Val())
			requireBodyInHash(t, b, "q", nt)
			got, err := b.r.GetTask(b.ctx, nt.ID)
			require.NoError(t, err)
			require.True(t, got.Status.Terminal(), got.Status)
			require.Equal(t, string(nt.Payload), string(got.Payload))
		})
	}
}

func TestHeldTaskKeepsBody(t *testing.T) {
	t.Parallel()
	b := newTestRDB(t)
	require.NoError(t, b.r.EnsureGroups(b.ctx, "q"))
	_, err := b.r.SetLimits(b.ctx, "q", &dtqtype.QueueLimits{KeyConcurrency: 1})
	require.NoError(t, err)
	first, second := bodyTask(b, t, "q"), bodyTask(b, t, "q")
	first.ConcurrencyKey, second.ConcurrencyKey = "k", "k"
	b.ingest(t, "q", first, second)
	cr, err := b.r.Claim(b.ctx, "q", testSettings, 10, b.now, "n1")
	require.NoError(t, err)
	require.Len(t, cr.Tasks, 1)
	require.Equal(t, 1, cr.Held)
	requireBodyInHash(t, b, "q", second) // held: out of the stream
	got, err := b.r.GetTask(b.ctx, second.ID)
	require.NoError(t, err)
	require.Equal(t, string(second.Payload), string(got.Payload))
}

func TestReplayOfCancelledQueuedTaskHasPayload(t *testing.T) {
	t.Parallel()
	b := newTestRDB(t)
	nt := bodyTask(b, t, "q")
	nt.IdempotencyKey, nt.Fingerprint = "k1", "fp"
	b.ingest(t, "q", nt)
	// Cancelled while queued: the payload left the stream entry for the
	// hash, which is what a replay answers with.
	as := &AdminSettings{EventsMaxLen: 1000, FailedRetention: time.Hour, IdempotencyTTL: time.Hour, DLQEnabled: true}
	_, _, err := b.r.CancelTask(b.ctx, "q", nt.ID, as, b.now, "test")
	require.NoError(t, err)
	again := nt
	again.ID = NewTaskID(0, b.now)
	res := b.ingest(t, "q", again)
	require.Equal(t, Duplicate, res[0].Outcome)
	require.Equal(t, nt.ID, res[0].TaskID)
	require.Equal(t, dtqtype.StatusCancelled, res[0].Task.Status)
	require.Equal(t, string(nt.Payload), string(res[0].Task.Payload))
	require.Equal(t, string(nt.Metadata), string(res[0].Task.Metadata))
}
