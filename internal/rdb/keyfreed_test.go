package rdb

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/dtq-io/dtq/dtqtype"
)

// TestKeyedStartIsNeverStampedBeforeTheReleaseThatFreedItsSlot: with
// key_concurrency 1, worker w2 reads its clock (t0+50ms), then w1's
// finalize of the key's running task lands with its own, later time
// (t0+100ms) and gives the key's slot back, then w2's claim arrives and
// starts the key's next task. The claim ran after the release, so the
// recorded runs must not overlap: the second task's started_at is the
// release's time, not the earlier one w2 read. A keyless task, or a queue
// without key_concurrency, keeps the claim's own time.
func TestKeyedStartIsNeverStampedBeforeTheReleaseThatFreedItsSlot(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name    string
		limits  dtqtype.QueueLimits
		key     string
		clamped bool
	}{
		{"key_concurrency", dtqtype.QueueLimits{KeyConcurrency: 1}, "acme", true},
		{"key_concurrency with key queues", dtqtype.QueueLimits{KeyConcurrency: 1, KeyOrder: "fifo"}, "acme", true},
		{"keyless task", dtqtype.QueueLimits{KeyConcurrency: 1}, "", false},
		{"no key_concurrency", dtqtype.QueueLimits{Concurrency: 1}, "acme", false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			b := newTestRDB(t)
			_, err := b.r.SetLimits(b.ctx, "q", &tc.limits)
			require.NoError(t, err)
			require.NoError(t, b.r.EnsureGroups(b.ctx, "q"))
			ids := b.ingestKey(t, 2, tc.key, 5)
			t0 := b.now
			w1, w2 := *testSettings, *testSettings
			w1.WorkerID, w2.WorkerID = "w1", "w2"
			first, err := b.r.Claim(b.ctx, "q", &w1, 1, t0, "c1")
			require.NoError(t, err)
			require.Len(t, first.Tasks, 1)
			require.Equal(t, ids[0], first.Tasks[0].ID)

			released := t0.Add(100 * time.Millisecond)
			errs, err := b.r.FinishSucceeded(b.ctx, "q", &w1, released, []Success{{ID: ids[0], Attempt: 1}})
			require.NoError(t, err)
			require.NoError(t, errs[0])
			read := t0.Add(50 * time.Millisecond) // w2's clock, read before the release landed
			second, err := b.r.Claim(b.ctx, "q", &w2, 1, read, "c2")
			require.NoError(t, err)
			require.Len(t, second.Tasks, 1)
			require.Equal(t, ids[1], second.Tasks[0].ID)

			done := b.get(t, ids[0])
			require.Equal(t, released.UnixMilli(), done.Execution.FinishedAt.UnixMilli())
			started := b.get(t, ids[1]).Execution.StartedAt
			if tc.clamped {
				require.Equal(t, released.UnixMilli(), started.UnixMilli(), "stamped before the release that freed its slot")
			} else {
				require.Equal(t, read.UnixMilli(), started.UnixMilli())
			}
		})
	}
}
