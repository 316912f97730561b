package rdb

import (
	"strconv"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"

	"github.com/dtq-io/dtq/dtqtype"
)

// An entry ingest wrote carries what the claim needs (field c, see
// ingest.lua): the claim reads only status and stream_id of the hash and
// must hand out exactly what a read of the whole hash would.

func TestClaimFromEntryHandsOutTheTask(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name  string
		mod   func(*NewTask)
		entry bool // the entry carries c
	}{
		{"plain", func(nt *NewTask) { nt.Metadata = nil }, true},
		{"metadata", func(nt *NewTask) { nt.Metadata = []byte(`{"trace":"x"}`) }, true},
		{"idempotency key: whole hash read", func(nt *NewTask) { nt.IdempotencyKey = "order 17" }, false},
		{"expires later", func(nt *NewTask) { nt.ExpiresAt = nt.CreatedAt + 60000 }, true},
		{"concurrency key", func(nt *NewTask) { nt.ConcurrencyKey = "tenant-1" }, true},
		{"priority 9, long type", func(nt *NewTask) { nt.Priority = 9; nt.Type = "billing.invoice:send-v2" }, true},
		{"created at the time in its id", func(nt *NewTask) { nt.CreatedAt = TaskIDTime(nt.ID).UnixMilli() }, true},
		{"created before its id", func(nt *NewTask) { nt.CreatedAt -= 1500 }, true},
		{"concurrency key with a tab: whole hash read", func(nt *NewTask) { nt.ConcurrencyKey = "a\tb" }, false},
		{"expires later, key, metadata", func(nt *NewTask) {
			nt.ExpiresAt, nt.ConcurrencyKey, nt.Metadata = nt.CreatedAt+60000, "k", []byte(`{"a":1}`)
		}, true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			b := newTestRDB(t)
			require.NoError(t, b.r.EnsureGroups(b.ctx, "q"))
			nt := b.task(t, "q", "")
			tc.mod(&nt)
			b.ingest(t, "q", nt)
			entries, err := b.c.XRange(b.ctx, b.keys.Stream("q", nt.Priority), "-", "+").Result()
			require.NoError(t, err)
			require.Len(t, entries, 1)
			c, has := entries[0].Values["c"]
			require.Equal(t, tc.entry, has)
			if has {
				require.Equal(t, claimFields(&nt, expiresArg(nt.ExpiresAt), b.now.UnixMilli()), c)
				require.Contains(t, c, nt.Type+"\t30000\t5\t"+createdUnlessID(nt.ID, nt.CreatedAt)+"\t")
			}

			cr, err := b.r.Claim(b.ctx, "q", testSettings, 1, b.now, "c1")
			require.NoError(t, err)
			require.Len(t, cr.Tasks, 1)
			meta := nt.Metadata
			if meta == nil {
				meta = []byte("{}")
			}
			require.Equal(t, ClaimedTask{
				Queue: "q", ID: nt.ID, Attempt: 1, Type: nt.Type, Payload: nt.Payload, TimeoutMS: nt.TimeoutMS,
				MaxAttempts: nt.MaxAttempts, IdempotencyKey: nt.IdempotencyKey, CreatedAt: nt.CreatedAt,
				Metadata: meta, Priority: nt.Priority,
			}, cr.Tasks[0])
			got := b.get(t, nt.ID)
			require.Equal(t, dtqtype.StatusRunning, got.Status)
			require.Equal(t, string(nt.Payload), string(got.Payload))
			if nt.ExpiresAt != 0 {
				require.Zero(t, b.c.ZCard(b.ctx, b.keys.Expiry("q")).Val(), "a started task leaves the expiry index")
			}
			if nt.ConcurrencyKey != "" {
				require.Equal(t, "1", b.c.HGet(b.ctx, b.keys.KeyRunning("q"), nt.ConcurrencyKey).Val())
			}
		})
	}
}

// TestClaimFromEntryTrustsOnlyWhatCannotChange: an entry ingest wrote is
// started without a read of the hash, so every way a queued task leaves
// queued must take its entry with it; a hash gone all the same is noticed
// by the start's write; an entry of any other writer, and an overdue task,
// still have the hash read.
func TestClaimFromEntryTrustsOnlyWhatCannotChange(t *testing.T) {
	t.Parallel()
	as := &AdminSettings{EventsMaxLen: 1000, FailedRetention: time.Hour, IdempotencyTTL: time.Hour, DLQEnabled: true}
	tests := []struct {
		name   string
		mod    func(*NewTask)
		change func(b *testRDB, t *testing.T, nt NewTask) // after ingest, before the claim
		claim  time.Duration                              // the claim's time after ingest's
		status dtqtype.Status                             // "" = the task is gone
		event  string                                     // the event the claim emits for it ("" = none)
	}{
		{name: "cancelled", change: func(b *testRDB, t *testing.T, nt NewTask) {
			_, _, err := b.r.CancelTask(b.ctx, "q", nt.ID, as, b.now, "test")
			require.NoError(t, err)
		}, status: dtqtype.StatusCancelled},
		{name: "purged", change: func(b *testRDB, t *testing.T, nt NewTask) {
			_, err := b.r.PurgeQueue(b.ctx, "q", as, b.now)
			require.NoError(t, err)
		}, status: dtqtype.StatusCancelled},
		{name: "expired by the sweep", mod: func(nt *NewTask) { nt.ExpiresAt = nt.CreatedAt + 500 },
			change: func(b *testRDB, t *testing.T, nt NewTask) {
				_, err := b.r.SweepExpired(b.ctx, "q", testSettings, b.now.Add(time.Second))
				require.NoError(t, err)
			}, claim: time.Second, status: dtqtype.StatusExpired},
		{name: "replaced by its dedup key", mod: func(nt *NewTask) {
			nt.Dedup = &DedupSpec{Key: "k", Mode: "replace"}
		}, change: func(b *testRDB, t *testing.T, nt NewTask) {
			next := b.task(t, "q", "")
			next.Dedup = &DedupSpec{Key: "k", Mode: "replace"}
			b.ingest(t, "q", next)
			cr, err := b.r.Claim(b.ctx, "q", testSettings, 10, b.now, "c0")
			require.NoError(t, err)
			require.Len(t, cr.Tasks, 1)
			require.Equal(t, next.ID, cr.Tasks[0].ID)
		}}, // cancelled, and deleted at once: these ingest options keep no cancelled task
		{name: "hash deleted by hand", change: func(b *testRDB, t *testing.T, nt NewTask) {
			require.NoError(t, b.c.Del(b.ctx, b.keys.Task("q", nt.ID)).Err())
		}},
		{name: "overdue at the claim", mod: func(nt *NewTask) { nt.ExpiresAt = nt.CreatedAt + 500 },
			claim: time.Second, status: dtqtype.StatusExpired, event: "TASK_EXPIRED"},
		{name: "an entry without c that is not the current one", change: func(b *testRDB, t *testing.T, nt NewTask) {
			// An older entry of the task, as a writer other than ingest leaves it.
			stream := b.keys.Stream("q", nt.Priority)
			cur := b.c.HGet(b.ctx, b.keys.Task("q", nt.ID), "stream_id").Val()
			require.NoError(t, b.c.XDel(b.ctx, stream, cur).Err())
			require.NoError(t, b.c.XAdd(b.ctx, &redis.XAddArgs{Stream: stream, Values: []any{"t", nt.ID, "a", "1"}}).Err())
		}, status: dtqtype.StatusQueued, event: "TASK_DUPLICATE_ABSORBED"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			b := newTestRDB(t)
			require.NoError(t, b.r.EnsureGroups(b.ctx, "q"))
			nt := b.task(t, "q", "")
			if tc.mod != nil {
				tc.mod(&nt)
			}
			b.ingest(t, "q", nt)
			if tc.change != nil {
				tc.change(b, t, nt)
			}
			cr, err := b.r.Claim(b.ctx, "q", testSettings, 10, b.now.Add(tc.claim), "c1")
			require.NoError(t, err)
			require.Empty(t, cr.Tasks)
			require.Zero(t, b.c.XLen(b.ctx, b.keys.Stream("q", nt.Priority)).Val(), "the entry is gone from its band")
			st := b.c.HGet(b.ctx, b.keys.Task("q", nt.ID), "status").Val()
			require.Equal(t, string(tc.status), st)
			require.ErrorIs(t, b.c.ZScore(b.ctx, b.keys.Lease("q"), nt.ID).Err(), redis.Nil, "it does not run")
			evs := b.eventTypes(t, "q", nt.ID)
			require.NotContains(t, evs, "TASK_STARTED")
			if tc.event != "" {
				require.Contains(t, evs, tc.event)
			}
		})
	}
}

func expiresArg(ms int64) string {
	if ms == 0 {
		return ""
	}
	return strconv.FormatInt(ms, 10)
}
